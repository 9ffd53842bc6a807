"""The OpenAI chat completions wire format, as pure functions: requests out, stream events in.

No I/O here (`acp_server.providers.openai` does the HTTP): `request_body` turns a `ModelRequest`
into the JSON body of `POST /chat/completions`; `acp_server.providers.wire.SseDecoder` turns the
response's lines into server-sent event payloads; `DeltaMapper` turns each payload (one `chat.completion.chunk`) into
`StreamChunk`s, one per delta fragment, in the order they arrived, never merged.

Mapping (SPEC 1.2's chunk types):

- `delta.content` -> `text-delta`; `delta.reasoning_content` (DeepSeek, vLLM, llama.cpp) or
  `delta.reasoning` (OpenRouter, newer vLLM, Ollama) -> `reasoning-delta`. Empty strings carry
  nothing and make no chunk.
- `delta.tool_calls[i]` -> `tool-call-delta` with the call's id (from its first delta, which
  OpenAI sends only there), `name` only on the delta that carries it, `argumentsDelta` = the
  fragment. A delta with neither a name nor argument text makes no chunk.
- Blocks get indexes 0, 1, ... in order of appearance. One block is open at a time: a block
  starts (`block-start`) when a fragment of another kind, or of a new tool call, arrives, and the
  open one ends (`block-end`) then. A late fragment of an earlier tool call (servers that
  interleave parallel calls) keeps its own block's index.
- `finish_reason` ends the open block; `usage` (sent after the finish, in a chunk with no
  choices, when `stream_options.include_usage` is set) -> `usage`; the `finish` chunk itself is
  held back until the stream ends (`[DONE]`, or the end of the body after a finish reason), so
  that a model call's chunks always end with `finish`, as llm-replay's script expects (SPEC 5).
  `stop` becomes `tool-calls` when the stream held tool calls (Ollama and some vLLM versions say
  `stop`), so that the loop runs them.
- A `{"error": ...}` payload, a payload that is not a chat completion chunk, and a stream that
  ends before its finish reason are `ProviderError`s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ..core import stream as ev
from ..core.content import AudioContent, EmbeddedResource, ImageContent
from ..core.messages import (
    ModelMessage,
    ToolDefinition,
    ToolTurn,
    UserTurn,
)
from .base import ProviderError
from .wire import CODE_CHARS, MESSAGE_CHARS, Redact, block_text, clip, decode_event, unchanged

DONE: Final = "[DONE]"
_DONE_BYTES: Final = DONE.encode()

_FINISH_REASONS: Final[dict[str, ev.FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "length",
    "content_filter": "content-filter",
}


# ---------------------------------------------------------------------------------------------
# Requests.


def request_body(
    model: str,
    messages: list[ModelMessage],
    tools: list[ToolDefinition],
    *,
    system: str | None = None,
    max_tokens: int | None = None,
    reasoning_effort: str | None = None,
) -> dict[str, Any]:
    """The JSON body of a streaming chat completions request.

    Reasoning is not sent back: most servers ignore it and DeepSeek refuses a request whose
    assistant messages carry `reasoning_content`. An assistant message left with neither text nor
    tool calls (it held reasoning only) is left out, as providers reject empty assistant turns.
    """
    wire = [m for m in (_message(m) for m in messages) if m is not None]
    if system:
        wire.insert(0, {"role": "system", "content": system})
    body: dict[str, Any] = {
        "model": model,
        "messages": wire,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if reasoning_effort is not None:
        body["reasoning_effort"] = reasoning_effort
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in tools
        ]
    return body


def _message(message: ModelMessage) -> dict[str, Any] | None:
    if isinstance(message, UserTurn):
        return {"role": "user", "content": _user_content(message.content)}
    if isinstance(message, ToolTurn):
        return {
            "role": "tool",
            "tool_call_id": message.call_id,
            "content": _tool_text(message.content),
        }
    text = "".join(b.text for b in message.content if isinstance(b, ev.AssistantText))
    calls = [
        {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": b.arguments}}
        for b in message.content
        if isinstance(b, ev.AssistantToolCall)
    ]
    if not text and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        out["tool_calls"] = calls
    return out


def _user_content(blocks: list[Any]) -> str | list[dict[str, Any]]:
    """A single string when the prompt is text only (every server takes that), else parts."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ImageContent):
            parts.append(
                {
                    "type": "image_url",
                    "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"},
                }
            )
        elif isinstance(block, AudioContent):
            audio_format = (
                block.mime_type.rpartition("/")[2].removeprefix("x-").replace("mpeg", "mp3")
            )
            parts.append(
                {"type": "input_audio", "input_audio": {"data": block.data, "format": audio_format}}
            )
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource.blob, str):
            mime = block.resource.mime_type if isinstance(block.resource.mime_type, str) else ""
            if mime.startswith("image/"):
                parts.append(
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{mime};base64,{block.resource.blob}"},
                    }
                )
            else:
                parts.append(
                    {"type": "text", "text": f"(binary resource {block.resource.uri}, not shown)"}
                )
        else:
            parts.append({"type": "text", "text": block_text(block)})
    if all(p["type"] == "text" for p in parts):
        return "\n\n".join(p["text"] for p in parts)
    return parts


def _tool_text(blocks: list[Any]) -> str:
    return "\n".join(text for text in (block_text(b) for b in blocks) if text)


# ---------------------------------------------------------------------------------------------
# Chat completion chunks.


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCall(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _TokenDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _TokenDetails | None = None


class ErrorPayload(msgspec.Struct):
    """An `error` object as OpenAI-compatible servers send it."""

    message: str | None = None
    code: int | str | None = None
    type: str | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: ErrorPayload | str | None = None


_decoder: Final = msgspec.json.Decoder(_Chunk)


def error_payload_message(
    error: ErrorPayload | str, redact: Redact = unchanged
) -> tuple[str, int | str | None]:
    """The message and code of a server's error, each scrubbed, then cut to length."""
    if isinstance(error, str):
        return clip(redact(error), MESSAGE_CHARS), None
    message = error.message or error.type or "unknown error"
    code = clip(redact(error.code), CODE_CHARS) if isinstance(error.code, str) else error.code
    return clip(redact(message), MESSAGE_CHARS), code


class DeltaMapper:
    """One streamed response's payloads in, its `StreamChunk`s out (see the module docstring).

    `event(data)` maps one server-sent event's data; `done` turns true at `[DONE]`, after which
    the caller stops reading. `end()` is called when the body ends without `[DONE]`.
    """

    def __init__(self, new_call_id: Callable[[int], str], redact: Redact = unchanged) -> None:
        self._new_call_id = new_call_id
        self._redact = redact
        self._next_index = 0
        self._open: int | None = None
        self._open_kind: ev.BlockType | None = None
        self._calls: dict[tuple[str, int | str], tuple[int, str]] = {}
        self._finish: ev.FinishReason | None = None
        self.done = False
        self.events = 0
        """Payloads seen (`[DONE]` included), for error messages."""

    def event(self, data: str | bytes) -> list[ev.StreamChunk]:
        """Map one event's data (UTF-8 bytes, or text)."""
        self.events += 1
        if data.strip() == (_DONE_BYTES if isinstance(data, bytes) else DONE):
            self.done = True
            return self._finish_chunks("the stream said [DONE] before any finish reason")
        chunk = decode_event(_decoder, data, self.events, self._redact)
        if chunk.error is not None:
            message, code = error_payload_message(chunk.error, self._redact)
            raise ProviderError(
                f"the server reported an error mid-stream: {message}",
                code if code is not None else "stream-error",
            )
        out: list[ev.StreamChunk] = []
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue  # only one completion is asked for
            delta = choice.delta
            if delta is not None:
                reasoning = (
                    delta.reasoning_content
                    if delta.reasoning_content is not None
                    else delta.reasoning
                )
                if reasoning:
                    out.extend(self._text("reasoning", reasoning))
                if delta.content:
                    out.extend(self._text("text", delta.content))
                for position, call in enumerate(delta.tool_calls or ()):
                    out.extend(self._tool_call(position, call))
            if choice.finish_reason:
                out.extend(self._close())
                self._finish = self._finish_reason(choice.finish_reason)
        if chunk.usage is not None:
            u = chunk.usage
            cached = (
                u.prompt_tokens_details.cached_tokens
                if u.prompt_tokens_details is not None
                else None
            )
            out.append(
                ev.UsageChunk(
                    ev.Usage(
                        u.prompt_tokens or 0,
                        u.completion_tokens or 0,
                        cached if cached is not None else UNSET,
                    )
                )
            )
        return out

    @property
    def finished(self) -> bool:
        """Whether the finish reason has arrived (the `finish` chunk waits for the end)."""
        return self._finish is not None

    def end(self) -> list[ev.StreamChunk]:
        """The body ended without `[DONE]`: complete if a finish reason came, else cut."""
        return self._finish_chunks("the stream ended before its finish reason")

    # -- internals -----------------------------------------------------------------------------

    def _finish_chunks(self, problem: str) -> list[ev.StreamChunk]:
        if self._finish is None:
            raise ProviderError(f"{problem} (after {self.events} events)", "stream-cut")
        return [*self._close(), ev.Finish(self._finish)]

    def _finish_reason(self, reason: str) -> ev.FinishReason:
        if reason == "error":
            raise ProviderError(
                "the server ended the stream with finish_reason 'error'", "stream-error"
            )
        mapped = _FINISH_REASONS.get(reason, "stop")
        if mapped == "stop" and self._calls:
            return "tool-calls"
        return mapped

    def _close(self) -> list[ev.StreamChunk]:
        if self._open is None:
            return []
        index, self._open, self._open_kind = self._open, None, None
        return [ev.BlockEnd(index)]

    def _start(self, kind: ev.BlockType) -> list[ev.StreamChunk]:
        out = self._close()
        self._open, self._open_kind = self._next_index, kind
        self._next_index += 1
        out.append(ev.BlockStart(self._open, kind))
        return out

    def _text(self, kind: ev.BlockType, text: str) -> list[ev.StreamChunk]:
        out = self._start(kind) if self._open_kind != kind else []
        assert self._open is not None
        out.append(
            ev.TextDelta(self._open, text)
            if kind == "text"
            else ev.ReasoningDelta(self._open, text)
        )
        return out

    def _tool_call(self, position: int, call: _ToolCall) -> list[ev.StreamChunk]:
        key: tuple[str, int | str]
        if call.index is not None:
            key = ("index", call.index)
        elif call.id:
            key = ("id", call.id)
        else:
            key = ("position", position)
        out: list[ev.StreamChunk] = []
        known = self._calls.get(key)
        if known is None:
            out.extend(self._start("tool-call"))
            assert self._open is not None
            known = self._calls[key] = (self._open, call.id or self._new_call_id(self._open))
        index, call_id = known
        name = call.function.name if call.function is not None else None
        arguments = call.function.arguments if call.function is not None else None
        if name or arguments:
            out.append(ev.ToolCallDelta(index, call_id, arguments or "", name if name else UNSET))
        return out


__all__ = [
    "DONE",
    "DeltaMapper",
    "ErrorPayload",
    "error_payload_message",
    "request_body",
]
