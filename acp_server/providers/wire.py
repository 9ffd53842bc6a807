"""Pure pieces shared by the HTTP providers' wire formats: server-sent events and error text.

No I/O here. `SseDecoder` turns a response body's lines into event payloads (WHATWG framing,
with a bound on an event's size) and `decode_event` one payload into its wire's type; `clip` and
`excerpt` shorten what a server sent for an error message, after `Redact` has scrubbed it of the
API key; `block_text` is the text a model reads in place of a content block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple, TypeVar

import msgspec

from ..core.content import (
    AudioContent,
    DiffContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from .base import ProviderError

T = TypeVar("T")

MAX_EVENT_CHARS: Final = 16 * 1024 * 1024
"""The longest server-sent event payload accepted (a longer one fails the stream)."""
EXCERPT_CHARS: Final = 200
MESSAGE_CHARS: Final = 500
"""The most of a server's own error message that an error message quotes."""
CODE_CHARS: Final = 100
"""The most of a server's own error code (a string) that a failure carries."""

Redact = Callable[[str], str]
"""Scrubs a text of the API key. Applied to what the server sent before it is cut to length,
so that a key across the cut leaves nothing of itself behind."""


def unchanged(text: str) -> str:
    return text


def clip(text: str, limit: int) -> str:
    """`text`, or its first `limit` characters and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "..."


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` shortened for an error message, as a Python literal (control characters shown)."""
    return repr(clip(text, limit))


def decode_event(
    decoder: msgspec.json.Decoder[T], data: str | bytes, number: int, redact: Redact
) -> T:
    """Event payload `number` of a stream, decoded; a "malformed-event" `ProviderError` that
    quotes it (scrubbed, cut) when it is not what the wire sends."""
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        raise ProviderError(
            f"malformed server-sent event {number} ({redact(str(exc))}): {excerpt(redact(text))}",
            "malformed-event",
        ) from None


def block_text(block: object, unknown: str = "") -> str:
    """The text a model reads in place of a content block that is not sent as itself (an image
    a wire cannot carry, a diff, a link); `unknown` for a kind of block no text stands for."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ResourceLink):
        return f"[{block.name}]({block.uri})"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        return f"{resource.uri}:\n{resource.text if isinstance(resource.text, str) else ''}"
    if isinstance(block, DiffContent):
        return f"(diff of {block.path})"
    if isinstance(block, (ImageContent, AudioContent)):
        return f"({block.mime_type} content, not shown)"
    return unknown


class SseEvent(NamedTuple):
    event: str
    """The `event:` field; "" when the event named none (then it is a "message")."""
    data: str


class SseDecoder:
    """Server-sent events (the WHATWG framing), fed one line at a time without its line ending.

    `line()` returns the event's data when a blank line completes it (`event_line()` returns
    the event with its name); comments (`:`), `id`, `retry` and unknown fields are skipped.
    `end()` returns an event left without its closing blank line when the body ends.

    `feed()` takes the body's bytes as they arrive instead, pieces cut anywhere, and returns
    the data of every event they complete, as UTF-8 bytes (`end_bytes()` at the end of the
    body): no text decoding and no line objects per line, which is most of the cost of
    reading a stream of small events. A decoder is fed one way or the other, not both.
    """

    __slots__ = ("_buffer", "_chars", "_cr", "_data", "_event", "_max_chars", "_raw")

    def __init__(self, max_chars: int = MAX_EVENT_CHARS) -> None:
        self._data: list[str] = []
        self._event = ""
        self._chars = 0
        self._max_chars = max_chars
        self._buffer = b""
        self._cr = False
        self._raw: list[bytes] = []

    def feed(self, piece: bytes) -> list[bytes]:
        if self._cr:  # a CR that ended the last piece: its LF may begin this one
            self._cr = False
            if piece.startswith(b"\n"):
                piece = piece[1:]
        if b"\r" in piece:
            if piece.endswith(b"\r"):
                self._cr = True
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (self._buffer + piece).split(b"\n") if self._buffer else piece.split(b"\n")
        self._buffer = lines.pop()
        if len(self._buffer) > self._max_chars:
            self._too_long()
        out: list[bytes] = []
        raw = self._raw
        for line in lines:
            if not line:
                if raw:
                    out.append(raw[0] if len(raw) == 1 else b"\n".join(raw))
                    raw.clear()
                    self._chars = 0
                continue
            if line.startswith(b"data:"):
                value = line[6:] if line.startswith(b"data: ") else line[5:]
                self._chars += len(value) + 1
                if self._chars > self._max_chars:
                    self._too_long()
                raw.append(value)
            elif line == b"data":
                raw.append(b"")
        return out

    def end_bytes(self) -> bytes | None:
        """The data of an event the body's end left without its closing blank line."""
        tail = self.feed(b"\n\n") if self._buffer or self._raw else []
        return tail[0] if tail else None

    def _too_long(self) -> None:
        raise ProviderError(
            f"a server-sent event is longer than {self._max_chars} characters",
            "malformed-event",
        )

    def line(self, line: str) -> str | None:
        event = self.event_line(line)
        return event.data if event is not None else None

    def event_line(self, line: str) -> SseEvent | None:
        if not line:
            return self.end_event()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._chars += len(value) + 1
            if self._chars > self._max_chars:
                self._too_long()
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def end(self) -> str | None:
        event = self.end_event()
        return event.data if event is not None else None

    def end_event(self) -> SseEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SseEvent(self._event, "\n".join(self._data))
        self._data = []
        self._event = ""
        self._chars = 0
        return event


__all__ = [
    "CODE_CHARS",
    "MAX_EVENT_CHARS",
    "MESSAGE_CHARS",
    "Redact",
    "SseDecoder",
    "SseEvent",
    "clip",
    "excerpt",
    "unchanged",
]
