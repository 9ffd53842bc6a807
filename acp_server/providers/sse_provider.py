"""`SseProvider`: what an HTTP provider that streams server-sent events is made of.

It holds the tunables every HTTP provider takes (`HttpTuning`, by keyword) and runs each model
request: it builds the request (URL, content types, the key's headers), and runs attempts of it
through `acp_server.providers.http.stream_with_retries`. One attempt posts, checks the answer,
decodes its events (`acp_server.providers.wire.SseDecoder`), maps them onto chunks and tells a
cut stream from a complete one. A provider (`openai`, `anthropic`) subclasses it as a dataclass
with its own fields and says only what is its own: the body, the headers that carry the key,
how an answer is checked and how its events map (`ChunkMapper`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypedDict

import anyio
import httpx
import msgspec

from ..core.stream import StreamChunk
from .base import ModelRequest, ProviderError
from .http import (
    Failure,
    HttpClient,
    Progress,
    RetryPolicy,
    as_secret,
    drain,
    redactor,
    retryable_status,
    shown_url,
    stream_with_retries,
    transport_failure,
    validate_base_url,
)
from .secret import Secret
from .settings import ProviderSettings
from .wire import SseDecoder


class ChunkMapper(Protocol):
    """One streamed response's event payloads in, its chunks out (a provider's own wire)."""

    done: bool
    """The stream's last event has arrived: stop reading."""
    events: int
    """Payloads seen, for messages."""

    @property
    def finished(self) -> bool:
        """Everything but the end marker has arrived (a break after it is taken as the end)."""

    def event(self, data: bytes) -> list[StreamChunk]: ...

    def end(self) -> list[StreamChunk]:
        """The body ended before `done`: the held-back chunks, or a "stream-cut" error."""


@dataclass(eq=False, kw_only=True)
class HttpTuning:
    """The settings every HTTP provider takes, by keyword, and its one HTTP client."""

    connect_timeout: float = 10.0
    """Seconds to open the connection (TLS included)."""
    read_timeout: float = 300.0
    """Seconds without a byte from the server (reasoning models think a while before the first)."""
    max_retries: int = 3
    """Attempts after the first, for a failure that may pass (`http.retryable_status`)."""
    retry_base_delay: float = 0.5
    """Seconds before the first retry; each next one waits twice as long, up to the maximum."""
    retry_max_delay: float = 20.0
    trust_env: bool = True
    """Honour HTTP(S)_PROXY / NO_PROXY / SSL_CERT_FILE from the environment, as httpx does."""
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, repr=False)
    """How the wait before a retry is spent (tests pass one that records it)."""
    _http: HttpClient = field(init=False, repr=False)


class HttpOptions(TypedDict, total=False):
    """`HttpTuning`'s fields as keywords, for a caller that passes on only those it was given."""

    connect_timeout: float
    read_timeout: float
    max_retries: int
    retry_base_delay: float
    retry_max_delay: float
    trust_env: bool


def settings_tuning(settings: ProviderSettings) -> HttpOptions:
    """The tunables the command line set (the others keep the provider's defaults)."""
    options = HttpOptions()
    if settings.connect_timeout is not None:
        options["connect_timeout"] = settings.connect_timeout
    if settings.read_timeout is not None:
        options["read_timeout"] = settings.read_timeout
    if settings.max_retries is not None:
        options["max_retries"] = settings.max_retries
    return options


class SseProvider(HttpTuning):
    """An HTTP provider whose answers are server-sent events. A subclass is a dataclass with
    its own fields (`base_url`, `api_key` and `name` among them), builds each request's body
    and headers, checks an answer (`_check`) and maps its events (`_mapper`)."""

    label: ClassVar[str]
    """What its messages and log lines begin with."""
    path: ClassVar[str]
    """Where a request is posted, below `base_url`."""
    extra_headers: ClassVar[dict[str, str]] = {}
    """Headers every request carries besides the content types and the key."""
    finish_word: ClassVar[str]
    """What its stream calls the reason it stopped ("finish reason", "stop reason")."""
    cut_retryable: ClassVar[bool] = False
    """Whether a stream its mapper finds cut, before any chunk, is tried again."""
    model: str
    base_url: str
    api_key: Secret | None
    name: str

    def __post_init__(self) -> None:
        self.base_url = validate_base_url(self.base_url)
        self.api_key = as_secret(self.api_key)
        self._http = HttpClient(self.connect_timeout, self.read_timeout, self.trust_env)

    async def aclose(self) -> None:
        """Close the provider's HTTP client (a later request opens a new one)."""
        await self._http.aclose()

    # -- what each provider says ----------------------------------------------------------------

    def _body(self, request: ModelRequest, model: str) -> dict[str, Any]:
        """The request's JSON body, in the provider's own wire."""
        raise NotImplementedError

    def _key_headers(self, key: Secret) -> dict[str, str]:
        """The headers that carry the key (the only place it is revealed)."""
        raise NotImplementedError

    async def _check(self, response: httpx.Response, shown: str) -> None:
        """Raise a `Failure` for an answer that is not a stream of events (`shown`: its URL)."""
        raise NotImplementedError

    def _mapper(self) -> ChunkMapper:
        """A mapper for one response's events."""
        raise NotImplementedError

    # -- what they share -------------------------------------------------------------------------

    @classmethod
    def warn_keyless(cls, settings: ProviderSettings, default_env: str) -> None:
        """Say, if it is so, that requests go without a key (a local server needs none; a
        remote one answers 401, which fails the turn with its message)."""
        if settings.api_key is None:
            logging.getLogger(cls.__module__).warning(
                "%s: $%s is not set: requests go without an API key",
                cls.label,
                settings.api_key_env or default_env,
            )

    def _redact(self, text: str) -> str:
        return redactor(self.api_key)(text)

    @property
    def _log(self) -> logging.Logger:
        """The logger of the provider's own module, which its log lines have always named."""
        return logging.getLogger(type(self).__module__)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """The chunks of one model request, attempted as the retry policy allows."""
        model = request.model or self.model
        url = f"{self.base_url}{self.path}"
        body = msgspec.json.encode(self._body(request, model))
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            **self.extra_headers,
            **(self._key_headers(self.api_key) if self.api_key is not None else {}),
        }
        self._log.debug(
            "%s: POST %s (model %s, %d messages)",
            self.label,
            shown_url(url),
            model,
            len(request.messages),
        )
        policy = RetryPolicy(
            self.max_retries, self.retry_base_delay, self.retry_max_delay, self.sleep
        )

        def attempt(progress: Progress) -> AsyncGenerator[StreamChunk, None]:
            return self._attempt(url, body, headers, progress)

        return stream_with_retries(self.label, attempt, policy, self._redact, request.on_retry)

    async def _attempt(
        self, url: str, body: bytes, headers: dict[str, str], progress: Progress
    ) -> AsyncGenerator[StreamChunk, None]:
        """One request: its chunks, or a `Failure` saying whether another attempt may help."""
        shown = shown_url(url)
        mapper = self._mapper()
        try:
            async with self._http.get().stream(
                "POST", url, content=body, headers=headers
            ) as response:
                progress.responded = True
                await self._check(response, shown)
                decoder = SseDecoder()
                pieces = response.aiter_bytes()
                async for piece in pieces:
                    for data in decoder.feed(piece):
                        for chunk in mapper.event(data):
                            yield chunk
                        if mapper.done:
                            await drain(pieces)
                            return
                # The body ended before the last event: first an event left without its
                # closing blank line, then either the chunks held back or a cut stream.
                tail = decoder.end_bytes()
                for chunk in mapper.event(tail) if tail is not None else ():
                    yield chunk
                if mapper.done:
                    return
                if mapper.events == 0:
                    raise Failure(
                        "the response body ended with no events", "stream-cut", retryable=True
                    )
                for chunk in mapper.end():
                    yield chunk
        except httpx.TransportError as exc:  # timeouts included
            if mapper.finished:  # everything but the end marker (and perhaps usage) arrived
                self._log.warning(
                    "%s: the stream broke after its %s (%s): taken as complete",
                    self.label,
                    self.finish_word,
                    exc,
                )
                for chunk in mapper.end():
                    yield chunk
                return
            raise transport_failure(
                exc, progress, shown, shown_url(self.base_url), self._http
            ) from None
        except ProviderError as exc:  # from the decoder or the mapper: a malformed or error event
            retryable = (self.cut_retryable and exc.code == "stream-cut") or (
                isinstance(exc.code, int) and retryable_status(exc.code)
            )
            # An error event's text is the server's: the stderr line names its code only.
            summary = f"an error event ({exc.code})" if isinstance(exc.code, int) else None
            raise Failure(exc.message, exc.code, retryable=retryable, summary=summary) from None


__all__ = ["ChunkMapper", "HttpOptions", "HttpTuning", "SseProvider", "settings_tuning"]
