"""Anthropic's Messages API wire format, as pure functions: requests out, stream events in.

No I/O here (`acp_server.providers.anthropic` does the HTTP): `request_body` turns a
`ModelRequest` into the JSON body of `POST /v1/messages`; `EventMapper` turns each server-sent
event's payload into `StreamChunk`s, one per delta, in the order they arrived, never merged.

Mapping (SPEC 1.2's chunk types):

- `content_block_start` starts a block (`block-start`; indexes 0, 1, ... in order of
  appearance): `text` -> "text", `thinking` -> "reasoning", `tool_use` -> "tool-call", whose
  id and name go out at once in a `tool-call-delta` with no argument text. Other block types
  (`redacted_thinking`, server tools' blocks) are not mapped and their deltas are skipped.
- `text_delta` -> `text-delta`, `thinking_delta` -> `reasoning-delta`, `signature_delta` ->
  `reasoning-signature` (the signature the API wants back with the thinking block),
  `input_json_delta` -> `tool-call-delta`. Empty fragments carry nothing and make no chunk.
  `content_block_stop` -> `block-end` (a tool call that had no argument text gets `{}` first:
  the API streams none for an empty input).
- `message_start`'s usage and `message_delta`'s (cumulative) usage -> one `usage` chunk, then
  the stop reason -> `finish`, both at `message_stop`: `end_turn` / `stop_sequence` ->
  "stop", `tool_use` -> "tool-calls", `max_tokens` / `model_context_window_exceeded` ->
  "length", `refusal` -> "content-filter". `inputTokens` counts every input token (cache reads
  and writes included, as OpenAI's do), `cachedInputTokens` the reads, `cacheWriteInputTokens`
  the writes.
- An `error` event, a payload that is not a stream event, and a stream that ends before its
  stop reason are `ProviderError`s.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ..core import stream as ev
from ..core.content import EmbeddedResource, ImageContent
from ..core.messages import AssistantTurn, ModelMessage, ToolDefinition, ToolTurn, UserTurn
from .base import ProviderError
from .wire import CODE_CHARS, MESSAGE_CHARS, Redact, block_text, clip, decode_event, unchanged

log = logging.getLogger(__name__)

API_VERSION: Final = "2023-06-01"
EPHEMERAL: Final = {"type": "ephemeral"}
"""A prompt-caching breakpoint: the prefix up to the block that carries it is cached."""
IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_FINISH_REASONS: Final[dict[str, ev.FinishReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
}
_BLOCK_TYPES: Final[dict[str, ev.BlockType]] = {
    "text": "text",
    "thinking": "reasoning",
    "tool_use": "tool-call",
}
ERROR_STATUS: Final[dict[str, int]] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status each error type comes with, so that an `error` event mid-stream is
retried (before the first chunk) exactly when the same error as a status would be."""


# ---------------------------------------------------------------------------------------------
# Requests.


def request_body(
    model: str,
    messages: list[ModelMessage],
    tools: list[ToolDefinition],
    *,
    system: str | None,
    max_tokens: int,
    thinking_budget: int | None = None,
    cache: bool = True,
) -> dict[str, Any]:
    """The JSON body of a streaming Messages request.

    Reasoning goes back to the API only when it is signed (a thinking block of this API);
    unsigned reasoning (from another provider) is left out, and so is an assistant message
    left with nothing. Consecutive messages of one role are joined (tool results and the
    prompt after them make one user message, tool results first). With `cache`, the system
    prompt and the latest turn each end with a caching breakpoint.
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        role, content = _message(message)
        if not content:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(content)
        else:
            wire.append({"role": role, "content": content})
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True}
    if system:
        block: dict[str, Any] = {"type": "text", "text": system}
        if cache:
            block["cache_control"] = EPHEMERAL
        body["system"] = [block]
    if cache and wire:
        _mark_latest_turn(wire[-1]["content"])
    body["messages"] = wire
    if tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in tools
        ]
    if thinking_budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    return body


def _mark_latest_turn(content: list[dict[str, Any]]) -> None:
    """A breakpoint on the turn's last block that can carry one (thinking blocks cannot)."""
    for block in reversed(content):
        if block["type"] not in ("thinking", "redacted_thinking"):
            block["cache_control"] = EPHEMERAL
            return


def _message(message: ModelMessage) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserTurn):
        return "user", [_content_block(b) for b in message.content]
    if isinstance(message, ToolTurn):
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": message.call_id,
            "content": [_content_block(b) for b in message.content]
            or [{"type": "text", "text": "(no output)"}],
        }
        if message.is_error is True:
            result["is_error"] = True
        return "user", [result]
    return "assistant", _assistant_content(message)


def _assistant_content(message: AssistantTurn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ev.AssistantReasoning):
            if isinstance(block.signature, str):
                out.append(
                    {"type": "thinking", "thinking": block.text, "signature": block.signature}
                )
        elif isinstance(block, ev.AssistantText):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ev.AssistantToolCall):
            out.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": _input(block)}
            )
    return out


def _input(call: ev.AssistantToolCall) -> dict[str, Any]:
    """The call's arguments as the object the API wants; `{}` when the model's text was not
    one (the tool answered that with an error result, which the model sees next)."""
    try:
        value = msgspec.json.decode(call.arguments or "{}")
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _content_block(block: Any) -> dict[str, Any]:
    if isinstance(block, ImageContent) and block.mime_type in IMAGE_TYPES:
        return _base64("image", block.mime_type, block.data)
    blob = block.resource.blob if isinstance(block, EmbeddedResource) else None
    if isinstance(blob, str):
        resource = block.resource
        mime = resource.mime_type if isinstance(resource.mime_type, str) else ""
        if mime in IMAGE_TYPES:
            return _base64("image", mime, blob)
        if mime == "application/pdf":
            return _base64("document", mime, blob)
        return {"type": "text", "text": f"(binary resource {resource.uri}, not shown)"}
    return {"type": "text", "text": block_text(block, "(content not shown)")}


def _base64(kind: str, media_type: str, data: str) -> dict[str, Any]:
    return {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": data}}


# ---------------------------------------------------------------------------------------------
# Stream events.


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _Message(msgspec.Struct):
    usage: _Usage | None = None


class _Pieces(msgspec.Struct, kw_only=True):
    """What a block's start and its deltas both may carry."""

    text: str | None = None
    thinking: str | None = None
    signature: str | None = None


class _Block(_Pieces, kw_only=True):
    type: str
    id: str | None = None
    name: str | None = None


class _Delta(_Pieces, kw_only=True):
    type: str | None = None
    partial_json: str | None = None
    stop_reason: str | None = None


class ErrorPayload(msgspec.Struct):
    type: str | None = None
    message: str | None = None


class _Event(msgspec.Struct):
    type: str
    index: int | None = None
    message: _Message | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    error: ErrorPayload | None = None


_decoder: Final = msgspec.json.Decoder(_Event)


def error_message(error: ErrorPayload, redact: Redact = unchanged) -> tuple[str, int | str]:
    """The message of an API error object and its code: the HTTP status its type comes with,
    else the type itself (scrubbed, cut to length)."""
    kind = error.type or "error"
    message = clip(redact(error.message or kind), MESSAGE_CHARS)
    return message, ERROR_STATUS.get(kind) or clip(redact(kind), CODE_CHARS)


class _Open:
    __slots__ = ("args", "id", "index", "kind")

    def __init__(self, index: int, kind: ev.BlockType, id: str = "") -> None:
        self.index, self.kind, self.id, self.args = index, kind, id, False


class EventMapper:
    """One streamed response's event payloads in, its `StreamChunk`s out (see the module
    docstring). `done` turns true at `message_stop`, after which the caller stops reading;
    `end()` is called when the body ends before it."""

    def __init__(self, redact: Redact = unchanged) -> None:
        self._redact = redact
        self._next_index = 0
        self._blocks: dict[int, _Open | None] = {}
        """The API's block index -> our block (None: a block type that is not mapped)."""
        self._calls = 0
        self._input = _Usage()
        self._output: _Usage | None = None
        self._stop: str | None = None
        self.done = False
        self.events = 0
        """Payloads seen, for error messages."""

    @property
    def finished(self) -> bool:
        """Whether the stop reason has arrived (usage and `finish` wait for `message_stop`)."""
        return self._stop is not None

    def event(self, data: str | bytes) -> list[ev.StreamChunk]:
        """Map one event's data (UTF-8 bytes, or text)."""
        self.events += 1
        event = decode_event(_decoder, data, self.events, self._redact)
        kind = event.type
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "content_block_stop":
            return self._stop_block(event)
        if kind == "message_start":
            if event.message is not None and event.message.usage is not None:
                self._input = event.message.usage
            return []
        if kind == "message_delta":
            if event.delta is not None and event.delta.stop_reason:
                self._stop = event.delta.stop_reason
            if event.usage is not None:
                self._output = event.usage
            return []
        if kind == "message_stop":
            self.done = True
            return self._finish_chunks("the stream stopped before its stop reason")
        if kind == "error":
            message, code = error_message(event.error or ErrorPayload(), self._redact)
            raise ProviderError(f"the server reported an error mid-stream: {message}", code)
        return []  # ping, and event types added to the API later

    def end(self) -> list[ev.StreamChunk]:
        """The body ended before `message_stop`: complete if the stop reason came, else cut."""
        return self._finish_chunks("the stream ended before its stop reason")

    # -- internals -----------------------------------------------------------------------------

    def _start(self, event: _Event) -> list[ev.StreamChunk]:
        block = event.content_block
        if event.index is None or block is None:
            raise ProviderError(
                f"server-sent event {self.events}: content_block_start without its block",
                "malformed-event",
            )
        out: list[ev.StreamChunk] = []
        mapped = _BLOCK_TYPES.get(block.type)
        if mapped is None:
            self._blocks[event.index] = None
            return out
        index = self._next_index
        self._next_index += 1
        opened = self._blocks[event.index] = _Open(index, mapped, block.id or "")
        out.append(ev.BlockStart(index, mapped))
        if mapped == "text" and block.text:
            out.append(ev.TextDelta(index, block.text))
        elif mapped == "reasoning":
            if block.thinking:
                out.append(ev.ReasoningDelta(index, block.thinking))
            if block.signature:
                out.append(ev.ReasoningSignature(index, block.signature))
        elif mapped == "tool-call":
            self._calls += 1
            if not opened.id:
                raise ProviderError(
                    f"server-sent event {self.events}: a tool_use block without an id",
                    "malformed-event",
                )
            out.append(ev.ToolCallDelta(index, opened.id, "", block.name or ""))
        return out

    def _delta(self, event: _Event) -> list[ev.StreamChunk]:
        opened = self._blocks.get(event.index) if event.index is not None else None
        delta = event.delta
        if opened is None or delta is None:
            return []  # a block that is not mapped (or a delta of no block)
        kind = delta.type
        if kind == "text_delta":
            return [ev.TextDelta(opened.index, delta.text)] if delta.text else []
        if kind == "thinking_delta":
            return [ev.ReasoningDelta(opened.index, delta.thinking)] if delta.thinking else []
        if kind == "signature_delta":
            if delta.signature:
                return [ev.ReasoningSignature(opened.index, delta.signature)]
            return []
        if kind == "input_json_delta":
            if not delta.partial_json:
                return []
            opened.args = True
            return [ev.ToolCallDelta(opened.index, opened.id, delta.partial_json)]
        return []  # citations and delta types added to the API later

    def _stop_block(self, event: _Event) -> list[ev.StreamChunk]:
        opened = self._blocks.get(event.index) if event.index is not None else None
        if opened is None:
            return []
        out: list[ev.StreamChunk] = []
        if opened.kind == "tool-call" and not opened.args:
            out.append(ev.ToolCallDelta(opened.index, opened.id, "{}"))
        out.append(ev.BlockEnd(opened.index))
        return out

    def _finish_chunks(self, problem: str) -> list[ev.StreamChunk]:
        if self._stop is None:
            raise ProviderError(f"{problem} (after {self.events} events)", "stream-cut")
        reason = _FINISH_REASONS.get(self._stop)
        if reason is None:
            log.warning(
                "anthropic: unknown stop reason %r: taken as the end of the turn", self._stop
            )
            reason = "stop"
        if reason == "stop" and self._calls:
            reason = "tool-calls"
        return [ev.UsageChunk(self._usage()), ev.Finish(reason)]

    def _usage(self) -> ev.Usage:
        first, last = self._input, self._output or _Usage()

        def figure(name: str) -> int:
            value = getattr(last, name)
            return value if value is not None else getattr(first, name) or 0

        read = figure("cache_read_input_tokens")
        written = figure("cache_creation_input_tokens")
        return ev.Usage(
            figure("input_tokens") + read + written,
            figure("output_tokens"),
            read if read or first.cache_read_input_tokens is not None else UNSET,
            written if written or first.cache_creation_input_tokens is not None else UNSET,
        )


__all__ = [
    "API_VERSION",
    "ERROR_STATUS",
    "ErrorPayload",
    "EventMapper",
    "error_message",
    "request_body",
]
