"""`openai`: a live model behind any OpenAI-compatible chat completions endpoint.

OpenAI, DeepSeek, vLLM, llama.cpp's server and Ollama all speak it. Each model request is one
streaming `POST {base_url}/chat/completions`; the response's server-sent events are mapped onto
`StreamChunk`s as they arrive (`acp_server.providers.openai_stream`, pure, does the mapping).

Failures:

- Before the first chunk is yielded, HTTP 408, 409, 429 and 5xx, an error event with such a
  code, a timeout, a connection error or a body that ends with nothing in it are retried, up to
  `max_retries` times, after `retry_base_delay * 2**attempt` seconds (capped at
  `retry_max_delay`), or after what the server's `Retry-After` / `retry-after-ms` header asks for
  (up to `MAX_RETRY_AFTER`; a longer wait is not retried). No jitter: one agent, one stream.
- Anything else, and anything once a chunk has been yielded (the chunks are in the log by
  then), is a `ProviderError` saying what failed, with the HTTP status as its code when there is
  one, else a short string: "timeout", "connection-error", "stream-cut", "malformed-event",
  "stream-error", "not-a-stream".

The API key comes only from an environment variable. `acp-server serve` takes it out of its
environment before the provider exists, `/proc/<pid>/environ` included, and passes it in
(`acp_server.providers.secret`); `from_env`, for other callers, removes the variable from
`os.environ`, so that the programs the model runs (`run_command`) do not inherit it. It is
sent as a Bearer header and is never logged: no log line prints request headers, and every
field of a failure (its message and its code) is scrubbed of it before it is cut to length.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Final, TypedDict, Unpack

import anyio
import httpx
import msgspec

from ..core.events import StreamChunk
from .base import ModelRequest, ProviderError
from .http import (
    Failure,
    HttpClient,
    Progress,
    ProviderConfigError,
    RetryPolicy,
    as_secret,
    drain,
    read_body,
    redactor,
    retryable_status,
    shown_url,
    status_failure,
    stream_with_retries,
    transport_failure,
    validate_base_url,
    validate_env_name,
)
from .openai_stream import (
    DeltaMapper,
    ErrorPayload,
    error_payload_message,
    request_body,
)
from .secret import Secret
from .settings import LiveSettings
from .wire import Redact, SseDecoder, excerpt

log = logging.getLogger(__name__)

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
DEFAULT_READ_TIMEOUT: Final = 300.0
"""Seconds without a byte from the server (reasoning models think a while before the first)."""
DEFAULT_MAX_RETRIES: Final = 3
DEFAULT_RETRY_BASE_DELAY: Final = 0.5
DEFAULT_RETRY_MAX_DELAY: Final = 20.0


class ProviderOptions(TypedDict, total=False):
    """The `OpenAIProvider` fields `from_env` passes through as they are."""

    connect_timeout: float
    read_timeout: float
    max_retries: int
    retry_base_delay: float
    retry_max_delay: float
    trust_env: bool
    name: str


@dataclass(eq=False)
class OpenAIProvider:
    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: Secret | None = field(default=None, repr=False)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY
    retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY
    trust_env: bool = True
    """Honour HTTP(S)_PROXY / NO_PROXY / SSL_CERT_FILE from the environment, as httpx does."""
    name: str = "openai"
    max_tokens: int | None = None
    """Sent when a request names none (`--max-tokens`); None: the server's default."""
    sleep: Callable[[float], Awaitable[None]] = field(default=anyio.sleep, repr=False)
    """How the wait before a retry is spent (tests pass one that records it)."""
    _http: HttpClient = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url = validate_base_url(self.base_url)
        self.api_key = as_secret(self.api_key)
        self._http = HttpClient(self.connect_timeout, self.read_timeout, self.trust_env)

    @classmethod
    def from_env(
        cls,
        model: str,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        *,
        environ: MutableMapping[str, str] | None = None,
        **options: Unpack[ProviderOptions],
    ) -> OpenAIProvider:
        """A provider whose key is taken out of `environ` (default: this process's environment).

        A missing or empty variable means no `Authorization` header (local servers need none);
        a server that wants one answers 401, which fails the turn with its message.
        """
        environ = os.environ if environ is None else environ
        key = environ.pop(validate_env_name(api_key_env), "")
        if not key:
            log.warning("openai: $%s is not set: requests go without an API key", api_key_env)
        return cls(model, base_url, Secret(key) if key else None, **options)

    async def aclose(self) -> None:
        """Close the provider's HTTP client (a later request opens a new one)."""
        await self._http.aclose()

    # -- streaming -----------------------------------------------------------------------------

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        url = f"{self.base_url}/chat/completions"
        model = request.model or self.model
        body = msgspec.json.encode(
            request_body(
                model,
                request.messages,
                request.tools,
                system=request.system,
                max_tokens=request.max_tokens or self.max_tokens,
                reasoning_effort=request.reasoning_effort,
            )
        )
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key.reveal()}"
        log.debug(
            "openai: POST %s (model %s, %d messages)",
            shown_url(url),
            model,
            len(request.messages),
        )
        policy = RetryPolicy(
            self.max_retries, self.retry_base_delay, self.retry_max_delay, self.sleep
        )

        def attempt(progress: Progress) -> AsyncGenerator[StreamChunk, None]:
            return self._attempt(url, body, headers, progress)

        return stream_with_retries("openai", attempt, policy, self._redact)

    async def _attempt(
        self, url: str, body: bytes, headers: dict[str, str], progress: Progress
    ) -> AsyncGenerator[StreamChunk, None]:
        """One request: its chunks, or a `Failure` saying whether another attempt may help."""
        shown = shown_url(url)
        mapper = DeltaMapper(_new_call_id, self._redact)
        try:
            async with self._http.get().stream(
                "POST", url, content=body, headers=headers
            ) as response:
                progress.responded = True
                if response.status_code != 200:
                    raise await status_failure(response, shown, self._redact, self._status_detail)
                if response.headers.get("content-type", "").startswith("application/json"):
                    raise await _not_a_stream(response, self._redact)
                decoder = SseDecoder()
                pieces = response.aiter_bytes()
                async for piece in pieces:
                    for data in decoder.feed(piece):
                        for chunk in mapper.event(data):
                            yield chunk
                        if mapper.done:
                            await drain(pieces)
                            return
                # The body ended without [DONE]: first an event left without its closing
                # blank line, then either the finish held back or a cut stream.
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
            if mapper.finished:  # everything but `[DONE]` (and perhaps usage) arrived
                log.warning(
                    "openai: the stream broke after its finish reason (%s): taken as complete",
                    exc,
                )
                for chunk in mapper.end():
                    yield chunk
                return
            raise transport_failure(
                exc, progress, shown, shown_url(self.base_url), self._http
            ) from None
        except ProviderError as exc:  # from the decoder or the mapper: a malformed or error event
            retryable = isinstance(exc.code, int) and retryable_status(exc.code)
            raise Failure(exc.message, exc.code, retryable=retryable) from None

    def _redact(self, text: str) -> str:
        return redactor(self.api_key)(text)

    def _status_detail(self, text: str) -> str | None:
        found = _body_error(text, self._redact)
        return found[0] if found is not None else None


def from_settings(settings: LiveSettings) -> OpenAIProvider:
    """The provider `--provider openai` names (`acp_server.providers.registry`)."""
    if settings.api_key is None:
        log.warning(
            "openai: $%s is not set: requests go without an API key",
            settings.api_key_env or DEFAULT_API_KEY_ENV,
        )
    return OpenAIProvider(
        settings.model,
        settings.base_url or DEFAULT_BASE_URL,
        settings.api_key,
        max_tokens=settings.max_tokens,
        **_options(settings),
    )


def _options(settings: LiveSettings) -> ProviderOptions:
    options = ProviderOptions()
    if settings.connect_timeout is not None:
        options["connect_timeout"] = settings.connect_timeout
    if settings.read_timeout is not None:
        options["read_timeout"] = settings.read_timeout
    if settings.max_retries is not None:
        options["max_retries"] = settings.max_retries
    return options


def _new_call_id(index: int) -> str:
    """An id for a tool call the server sent without one (some local servers do)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _body_error(text: str, redact: Redact) -> tuple[str, int | str | None] | None:
    """The server's own error message and code in a JSON body: `{"error": {...}}` (OpenAI,
    vLLM), `{"error": "..."}` (Ollama) or `{"message": "..."}`; None if there is none. Both
    are scrubbed, then cut to length."""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if value.get("error"):
        try:
            error = msgspec.convert(value["error"], ErrorPayload | str)
        except msgspec.ValidationError:
            error = str(value["error"])
        return error_payload_message(error, redact)
    if isinstance(value.get("message"), str):
        return error_payload_message(value["message"], redact)
    return None


async def _not_a_stream(response: httpx.Response, redact: Redact) -> Failure:
    """A 200 with a JSON body: the server ignored `stream: true`, or answered an error as JSON."""
    text = await read_body(response)
    found = _body_error(text, redact)
    if found is not None:
        message, code = found
        return Failure(
            f"the server answered with an error: {message}",
            code if code is not None else "stream-error",
            retryable=False,
        )
    return Failure(
        f"the server answered with JSON, not an event stream (does it support stream: true?): {excerpt(redact(text))}",
        "not-a-stream",
        retryable=False,
    )


__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "OpenAIProvider",
    "ProviderConfigError",
    "validate_base_url",
    "validate_env_name",
]
