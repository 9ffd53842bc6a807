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

import email.utils
import logging
import os
import ssl
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, MutableMapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Final, TypedDict, Unpack

import anyio
import httpx
import msgspec

from ..core.events import StreamChunk
from .base import ModelRequest, ProviderError
from .openai_stream import (
    CODE_CHARS,
    DeltaMapper,
    ErrorPayload,
    Redact,
    SseDecoder,
    clip,
    error_payload_message,
    excerpt,
    request_body,
)
from .secret import Secret

log = logging.getLogger(__name__)

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
DEFAULT_READ_TIMEOUT: Final = 300.0
"""Seconds without a byte from the server (reasoning models think a while before the first)."""
DEFAULT_MAX_RETRIES: Final = 3
DEFAULT_RETRY_BASE_DELAY: Final = 0.5
DEFAULT_RETRY_MAX_DELAY: Final = 20.0
MAX_RETRY_AFTER: Final = 60.0
"""A server asking to wait longer than this (seconds) is not retried: the turn fails at once."""
RETRYABLE_STATUS: Final = frozenset({408, 409, 429})
ERROR_BODY_BYTES: Final = 64 * 1024
REDACTED: Final = "[redacted]"


class ProviderConfigError(ValueError):
    """The provider cannot be set up as asked (a bad base URL, a bad variable name)."""


@dataclass
class _Progress:
    """How far one attempt got: retries are only for attempts that yielded nothing."""

    responded: bool = False
    yielded: int = 0


class _Failure(Exception):
    """One attempt failed; `retryable` says whether another attempt may fix it."""

    def __init__(
        self,
        message: str,
        code: int | str | None,
        *,
        retryable: bool,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after


def validate_base_url(base_url: str) -> str:
    """`base_url` without a trailing slash; an http(s) URL with a host, else `ProviderConfigError`."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ProviderConfigError(f"not a URL: {base_url!r} ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ProviderConfigError(f"not an http(s) URL: {base_url!r}")
    if url.query or url.fragment:
        raise ProviderConfigError(f"the API root takes no query or fragment: {base_url!r}")
    return base_url.rstrip("/")


def shown_url(url: str) -> str:
    """`url` as messages and logs show it: without any user name or password in it."""
    return str(httpx.URL(url).copy_with(userinfo=b""))


def validate_env_name(name: str) -> str:
    if not name or "=" in name or "\0" in name:
        raise ProviderConfigError(f"not an environment variable name: {name!r}")
    return name


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
    _ssl: ssl.SSLContext | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.base_url = validate_base_url(self.base_url)
        if isinstance(self.api_key, str):  # accept a plain string from Python callers
            self.api_key = Secret(self.api_key) if self.api_key else None
        if self.api_key is not None:
            _check_key(self.api_key)

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

    def bind_session(
        self,
        session_id: str,
        *,
        parent_session_id: str | None,
        model_calls: int,
        cwd: str | None = None,
    ) -> None:
        """Stateless: the whole conversation goes with every request."""

    # -- streaming -----------------------------------------------------------------------------

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        url = f"{self.base_url}/chat/completions"
        shown = shown_url(url)
        model = request.model or self.model
        body = msgspec.json.encode(
            request_body(
                model, request.messages, request.tools, reasoning_effort=request.reasoning_effort
            )
        )
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key.reveal()}"
        if self._ssl is None:  # made once: building one costs tens of milliseconds
            self._ssl = httpx.create_ssl_context(trust_env=self.trust_env)
        log.debug("openai: POST %s (model %s, %d messages)", shown, model, len(request.messages))
        attempt = 0
        while True:
            progress = _Progress()
            try:
                async with aclosing(self._attempt(url, shown, body, headers, progress)) as chunks:
                    async for chunk in chunks:
                        yield chunk
                return
            except _Failure as failure:
                delay = self._retry_delay(attempt, failure) if progress.yielded == 0 else None
                if delay is None:
                    raise ProviderError(
                        self._final_message(failure, attempt, progress.yielded),
                        self._redact_code(failure.code),
                    ) from None
                attempt += 1
                log.warning(
                    "openai: %s; retry %d of %d in %.2f s",
                    self._redact(failure.message),
                    attempt,
                    self.max_retries,
                    delay,
                )
                await anyio.sleep(delay)

    async def _attempt(
        self, url: str, shown: str, body: bytes, headers: dict[str, str], progress: _Progress
    ) -> AsyncGenerator[StreamChunk, None]:
        """One request: its chunks, or a `_Failure` saying whether another attempt may help."""
        timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
        ssl_context = self._ssl if self._ssl is not None else True
        mapper = DeltaMapper(_new_call_id, self._redact)
        try:
            async with (
                httpx.AsyncClient(
                    timeout=timeout, trust_env=self.trust_env, verify=ssl_context
                ) as client,
                client.stream("POST", url, content=body, headers=headers) as response,
            ):
                progress.responded = True
                if response.status_code != 200:
                    raise await _status_failure(response, shown, self._redact)
                if response.headers.get("content-type", "").startswith("application/json"):
                    raise await _not_a_stream(response, self._redact)
                decoder = SseDecoder()
                async for line in response.aiter_lines():
                    data = decoder.line(line)
                    if data is None:
                        continue
                    for chunk in mapper.event(data):
                        progress.yielded += 1
                        yield chunk
                    if mapper.done:
                        return
                # The body ended without [DONE]: first an event left without its closing
                # blank line, then either the finish held back or a cut stream.
                tail = decoder.end()
                for chunk in mapper.event(tail) if tail is not None else ():
                    progress.yielded += 1
                    yield chunk
                if mapper.done:
                    return
                if mapper.events == 0:
                    raise _Failure(
                        "the response body ended with no events", "stream-cut", retryable=True
                    )
                for chunk in mapper.end():
                    progress.yielded += 1
                    yield chunk
        except httpx.TransportError as exc:  # timeouts included
            if mapper.finished:  # everything but `[DONE]` (and perhaps usage) arrived
                log.warning(
                    "openai: the stream broke after its finish reason (%s): taken as complete",
                    _describe(exc),
                )
                for chunk in mapper.end():
                    progress.yielded += 1
                    yield chunk
                return
            if isinstance(exc, httpx.TimeoutException):
                raise _Failure(_timeout_message(exc, self), "timeout", retryable=True) from None
            if not progress.responded:
                raise _Failure(
                    f"cannot reach {shown}: {_describe(exc)}", "connection-error", retryable=True
                ) from None
            raise _Failure(
                f"the stream was cut: {_describe(exc)}", "stream-cut", retryable=True
            ) from None
        except ProviderError as exc:  # from the decoder or the mapper: a malformed or error event
            retryable = isinstance(exc.code, int) and _retryable_status(exc.code)
            raise _Failure(exc.message, exc.code, retryable=retryable) from None

    def _retry_delay(self, attempt: int, failure: _Failure) -> float | None:
        """Seconds to wait before the next attempt, or None: do not retry."""
        if not failure.retryable or attempt >= self.max_retries:
            return None
        if failure.retry_after is not None:
            return failure.retry_after if failure.retry_after <= MAX_RETRY_AFTER else None
        return min(self.retry_base_delay * 2.0**attempt, self.retry_max_delay)

    def _final_message(self, failure: _Failure, attempt: int, yielded: int) -> str:
        message = f"openai: {failure.message}"
        if attempt:
            message += f" (after {attempt + 1} attempts)"
        elif (
            failure.retryable
            and failure.retry_after is not None
            and failure.retry_after > MAX_RETRY_AFTER
            and not yielded
        ):
            message += f" (the server asked to wait {failure.retry_after:g} s: not retried)"
        if yielded:
            message += f" (after {yielded} chunks)"
        return self._redact(message)

    def _redact(self, text: str) -> str:
        return self.api_key.scrub(text, REDACTED) if self.api_key is not None else text

    def _redact_code(self, code: int | str | None) -> int | str | None:
        return clip(self._redact(code), CODE_CHARS) if isinstance(code, str) else code


def _check_key(key: Secret) -> None:
    """Refuse a key no Authorization header can carry (a trailing line break from a key file,
    say): the HTTP library's error would quote it escaped, past the scrubbing of error messages."""
    value = key.reveal()
    if not value.isascii() or not value.isprintable() or value != value.strip():
        raise ProviderConfigError(
            "the API key holds a character an HTTP header cannot carry (a control character, "
            "a line break, surrounding whitespace or a non-ASCII character)"
        )


def _new_call_id(index: int) -> str:
    """An id for a tool call the server sent without one (some local servers do)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def _retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


async def _read_body(response: httpx.Response) -> str:
    """The start of a response's body (enough for an error message), or what arrived of it."""
    raw = bytearray()
    try:
        async for piece in response.aiter_bytes():
            raw += piece
            if len(raw) >= ERROR_BODY_BYTES:
                break
    except httpx.HTTPError:
        pass  # the status says enough
    return raw[:ERROR_BODY_BYTES].decode("utf-8", "replace").strip()


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


async def _status_failure(response: httpx.Response, shown: str, redact: Redact) -> _Failure:
    """A non-200 answer as a failure carrying the server's own error message."""
    status = response.status_code
    text = await _read_body(response)
    found = _body_error(text, redact)
    detail = found[0] if found is not None else excerpt(redact(text)) if text else ""
    message = f"HTTP {status} {redact(response.reason_phrase) or 'error'} from {shown}"
    if detail:
        message += f": {detail}"
    return _Failure(
        message,
        status,
        retryable=_retryable_status(status),
        retry_after=_retry_after(response.headers),
    )


async def _not_a_stream(response: httpx.Response, redact: Redact) -> _Failure:
    """A 200 with a JSON body: the server ignored `stream: true`, or answered an error as JSON."""
    text = await _read_body(response)
    found = _body_error(text, redact)
    if found is not None:
        message, code = found
        return _Failure(
            f"the server answered with an error: {message}",
            code if code is not None else "stream-error",
            retryable=False,
        )
    return _Failure(
        f"the server answered with JSON, not an event stream (does it support stream: true?): {excerpt(redact(text))}",
        "not-a-stream",
        retryable=False,
    )


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, or `Retry-After` (seconds or a date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _timeout_message(exc: httpx.TimeoutException, provider: OpenAIProvider) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return f"connecting to {shown_url(provider.base_url)} timed out after {provider.connect_timeout:g} s"
    if isinstance(exc, httpx.ReadTimeout):
        return f"the server sent nothing for {provider.read_timeout:g} s"
    return f"the request timed out ({type(exc).__name__})"


def _describe(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "OpenAIProvider",
    "ProviderConfigError",
    "validate_base_url",
    "validate_env_name",
]
