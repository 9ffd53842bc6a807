"""What the HTTP providers share: configuration checks, one HTTP client, and the retry loop.

- `HttpClient` holds one `httpx.AsyncClient` per provider, made at its first request (inside
  the running event loop) and kept: its connection pool, TLS context and proxy settings serve
  every attempt of every request. `aclose()` closes it.
- `stream_with_retries` runs attempts of one model request. An attempt that fails before it
  has yielded a chunk with a `Failure` marked retryable is tried again, up to `max_retries`
  times, after `retry_base_delay * 2**attempt` seconds (capped at `retry_max_delay`), or after
  what the server's `Retry-After` / `retry-after-ms` header asked for (up to
  `MAX_RETRY_AFTER`; a longer wait is not retried). No jitter: one agent, one stream. Anything
  else, and anything once a chunk has been yielded (the chunks are in the log by then), is a
  `ProviderError` saying what failed, scrubbed of the key.
- `status_failure`, `transport_failure`: an HTTP answer or a transport error as a `Failure`.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Final

import anyio
import httpx

from ..core.stream import StreamChunk
from .base import ProviderError, RetryListener, RetryReport
from .secret import Secret
from .wire import CODE_CHARS, Redact, clip, excerpt

log = logging.getLogger(__name__)

MAX_RETRY_AFTER: Final = 60.0
"""A server asking to wait longer than this (seconds) is not retried: the turn fails at once."""
RETRYABLE_STATUS: Final = frozenset({408, 409, 429})
ERROR_BODY_BYTES: Final = 64 * 1024
DRAIN_SECONDS: Final = 1.0
"""How long the end of a body is awaited after a stream's last event, so that its connection
goes back to the pool (a body left unread closes it)."""
REDACTED: Final = "[redacted]"


class ProviderConfigError(ValueError):
    """The provider cannot be set up as asked (a bad base URL, a bad variable name, a bad key)."""


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


def check_key(key: Secret) -> None:
    """Refuse a key no HTTP header can carry (a trailing line break from a key file, say): the
    HTTP library's error would quote it escaped, past the scrubbing of error messages."""
    value = key.reveal()
    if not value.isascii() or not value.isprintable() or value != value.strip():
        raise ProviderConfigError(
            "the API key holds a character an HTTP header cannot carry (a control character, "
            "a line break, surrounding whitespace or a non-ASCII character)"
        )


def as_secret(key: Secret | str | None) -> Secret | None:
    """A key as a `Secret` (Python callers may pass a plain string), checked; "" means none."""
    if isinstance(key, str):
        key = Secret(key) if key else None
    if key is not None:
        check_key(key)
    return key


def redactor(key: Secret | None) -> Redact:
    if key is None:
        return lambda text: text
    return lambda text: key.scrub(text, REDACTED)


# ---------------------------------------------------------------------------------------------
# The client.


@dataclass(eq=False)
class HttpClient:
    """One `httpx.AsyncClient` for all of a provider's requests, made when first needed."""

    connect_timeout: float
    read_timeout: float
    trust_env: bool = True
    """Honour HTTP(S)_PROXY / NO_PROXY / SSL_CERT_FILE from the environment, as httpx does."""
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    def get(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.read_timeout, connect=self.connect_timeout),
                trust_env=self.trust_env,
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


# ---------------------------------------------------------------------------------------------
# Failures and retries.


@dataclass
class Progress:
    """How far one attempt got: whether the server answered (for the message of a broken
    connection); the retry loop counts the chunks it passed on."""

    responded: bool = False
    yielded: int = 0


class Failure(Exception):
    """One attempt failed; `retryable` says whether another attempt may fix it. `summary` is
    the message without what the server sent (its error text, a body excerpt): the retry's
    line on stderr says that much and no more."""

    def __init__(
        self,
        message: str,
        code: int | str | None,
        *,
        retryable: bool,
        retry_after: float | None = None,
        summary: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.retryable = retryable
        self.retry_after = retry_after
        self.summary = summary if summary is not None else message


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    """How a delay is waited (tests pass one that records it)."""

    def delay(self, attempt: int, failure: Failure) -> float | None:
        """Seconds to wait before the next attempt, or None: do not retry."""
        if not failure.retryable or attempt >= self.max_retries:
            return None
        if failure.retry_after is not None:
            return failure.retry_after if failure.retry_after <= MAX_RETRY_AFTER else None
        return min(self.base_delay * 2.0**attempt, self.max_delay)


Attempt = Callable[[Progress], AsyncGenerator[StreamChunk, None]]


async def stream_with_retries(
    label: str,
    attempt: Attempt,
    policy: RetryPolicy,
    redact: Redact,
    on_retry: RetryListener | None = None,
) -> AsyncIterator[StreamChunk]:
    """The chunks of the first attempt that does not fail before its first chunk (see the
    module docstring); `label` (the provider's name) begins every message. `on_retry` is told
    of each retry before its delay."""
    tries = 0
    while True:
        progress = Progress()
        try:
            async with aclosing(attempt(progress)) as chunks:
                async for chunk in chunks:
                    progress.yielded += 1
                    yield chunk
            return
        except Failure as failure:
            delay = policy.delay(tries, failure) if progress.yielded == 0 else None
            if delay is None:
                raise ProviderError(
                    _final_message(label, failure, tries, progress.yielded, redact),
                    clip(redact(failure.code), CODE_CHARS)
                    if isinstance(failure.code, str)
                    else failure.code,
                ) from None
            tries += 1
            # One line per retry on stderr: what failed, never the server's body.
            log.warning(
                "%s: model request failed (%s); retry %d of %d in %g s",
                label,
                redact(failure.summary),
                tries,
                policy.max_retries,
                delay,
            )
            if on_retry is not None:
                await on_retry(
                    RetryReport(
                        message=redact(f"{label}: {failure.message}"),
                        status=clip(redact(failure.code), CODE_CHARS)
                        if isinstance(failure.code, str)
                        else failure.code,
                        attempt=tries + 1,
                        attempts=policy.max_retries + 1,
                        delay=delay,
                    )
                )
            await policy.sleep(delay)


def _final_message(label: str, failure: Failure, tries: int, yielded: int, redact: Redact) -> str:
    message = f"{label}: {failure.message}"
    if tries:
        message += f" (after {tries + 1} attempts)"
    elif (
        failure.retryable
        and failure.retry_after is not None
        and failure.retry_after > MAX_RETRY_AFTER
        and not yielded
    ):
        message += f" (the server asked to wait {failure.retry_after:g} s: not retried)"
    if yielded:
        message += f" (after {yielded} chunks)"
    return redact(message)


async def drain(rest: AsyncIterator[object]) -> None:
    """Read what is left of a body after its last event (normally only its end), within
    `DRAIN_SECONDS`: a server that keeps sending after it loses its connection instead."""
    with anyio.move_on_after(DRAIN_SECONDS):
        async for _ in rest:
            pass


def retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


async def read_body(response: httpx.Response) -> str:
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


async def status_failure(
    response: httpx.Response,
    shown: str,
    redact: Redact,
    body_error: Callable[[str], str | None],
) -> Failure:
    """A non-200 answer as a failure carrying the server's own error message (which
    `body_error` finds in the body, scrubbed and cut; None if there is none)."""
    status = response.status_code
    text = await read_body(response)
    found = body_error(text)
    detail = found if found is not None else excerpt(redact(text)) if text else ""
    head = f"HTTP {status} {redact(response.reason_phrase) or 'error'} from {shown}"
    return Failure(
        f"{head}: {detail}" if detail else head,
        status,
        retryable=retryable_status(status),
        retry_after=retry_after(response.headers),
        summary=head,
    )


def retry_after(headers: httpx.Headers) -> float | None:
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


def transport_failure(
    exc: httpx.TransportError, progress: Progress, shown: str, shown_root: str, client: HttpClient
) -> Failure:
    """A transport error (timeouts included) of an attempt to reach `shown` (the request's URL
    as messages show it; `shown_root` the API root's) as a retryable failure."""
    if isinstance(exc, httpx.ConnectTimeout):
        message = f"connecting to {shown_root} timed out after {client.connect_timeout:g} s"
        return Failure(message, "timeout", retryable=True)
    if isinstance(exc, httpx.ReadTimeout):
        return Failure(
            f"the server sent nothing for {client.read_timeout:g} s", "timeout", retryable=True
        )
    if isinstance(exc, httpx.TimeoutException):
        return Failure(f"the request timed out ({type(exc).__name__})", "timeout", retryable=True)
    if not progress.responded:
        return Failure(f"cannot reach {shown}: {describe(exc)}", "connection-error", retryable=True)
    return Failure(f"the stream was cut: {describe(exc)}", "stream-cut", retryable=True)


def describe(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


__all__ = [
    "MAX_RETRY_AFTER",
    "REDACTED",
    "Failure",
    "HttpClient",
    "Progress",
    "ProviderConfigError",
    "RetryPolicy",
    "as_secret",
    "check_key",
    "describe",
    "drain",
    "read_body",
    "redactor",
    "retry_after",
    "retryable_status",
    "shown_url",
    "status_failure",
    "stream_with_retries",
    "transport_failure",
    "validate_base_url",
    "validate_env_name",
]
