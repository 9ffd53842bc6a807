"""`openai`: a live model behind any OpenAI-compatible chat completions endpoint.

OpenAI, DeepSeek, vLLM, llama.cpp's server and Ollama all speak it. Each model request is one
streaming `POST {base_url}/chat/completions`; the response's server-sent events are mapped onto
`StreamChunk`s as they arrive (`acp_server.providers.openai_stream`, pure, does the mapping).

Failures are those of every HTTP provider (`acp_server.providers.http`):

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
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Unpack

import httpx
import msgspec

from .base import ModelRequest
from .http import (
    Failure,
    ProviderConfigError,
    read_body,
    status_failure,
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
from .settings import ProviderSettings
from .sse_provider import ChunkMapper, HttpOptions, SseProvider, settings_tuning
from .wire import Redact, excerpt

log = logging.getLogger(__name__)

DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"


class ProviderOptions(HttpOptions, total=False):
    """The `OpenAIProvider` fields `from_env` passes through as they are."""

    name: str


@dataclass(eq=False)
class OpenAIProvider(SseProvider):
    """The tunables (timeouts, retries, `trust_env`, `sleep`) are `SseProvider`'s, by keyword."""

    label: ClassVar[str] = "openai"
    path: ClassVar[str] = "/chat/completions"
    finish_word: ClassVar[str] = "finish reason"
    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: Secret | None = field(default=None, repr=False)
    name: str = "openai"
    max_tokens: int | None = None
    """Sent when a request names none (`--max-tokens`); None: the server's default."""

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

    def _body(self, request: ModelRequest, model: str) -> dict[str, Any]:
        return request_body(
            model,
            request.messages,
            request.tools,
            system=request.system,
            max_tokens=request.max_tokens or self.max_tokens,
            reasoning_effort=request.reasoning_effort,
        )

    def _key_headers(self, key: Secret) -> dict[str, str]:
        return {"Authorization": f"Bearer {key.reveal()}"}

    def _mapper(self) -> ChunkMapper:
        return DeltaMapper(_new_call_id, self._redact)

    async def _check(self, response: httpx.Response, shown: str) -> None:
        if response.status_code != 200:
            raise await status_failure(response, shown, self._redact, self._status_detail)
        if response.headers.get("content-type", "").startswith("application/json"):
            raise await _not_a_stream(response, self._redact)

    def _status_detail(self, text: str) -> str | None:
        found = _body_error(text, self._redact)
        return found[0] if found is not None else None


def from_settings(settings: ProviderSettings) -> OpenAIProvider:
    """The provider `--provider openai` names (`acp_server.providers.registry`)."""
    OpenAIProvider.warn_keyless(settings, DEFAULT_API_KEY_ENV)
    return OpenAIProvider(
        settings.model,
        settings.base_url or DEFAULT_BASE_URL,
        settings.api_key,
        max_tokens=settings.max_tokens,
        **settings_tuning(settings),
    )


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
