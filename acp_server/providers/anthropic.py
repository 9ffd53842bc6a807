"""`anthropic`: Claude through Anthropic's Messages API, or a gateway that speaks it.

Each model request is one streaming `POST {base_url}/v1/messages`; the response's server-sent
events are mapped onto `StreamChunk`s as they arrive (`acp_server.providers.anthropic_stream`,
pure, does the mapping and builds the request body).

Failures are those of every HTTP provider (`acp_server.providers.http`): before the first
chunk, 408, 409, 429, 5xx (529 "overloaded" included), an `error` event of such a kind, a
timeout, a connection error or a body with no events are retried, after the server's
`retry-after` when it sends one; an `x-should-retry` header from the API overrules the status.
Anything else, and anything once a chunk has been yielded, fails the turn: a stream cut short
is a failed stream.

The key goes in the `x-api-key` header only. It is found by the key sources of
`acp_server.providers.secret` (`$ANTHROPIC_API_KEY` by default, handed over by the command
line without ever staying in the server's environment); no log line prints request headers,
and every failure is scrubbed of it before it is cut to length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import httpx
import msgspec

from .anthropic_stream import API_VERSION, ErrorPayload, EventMapper, error_message, request_body
from .base import ModelRequest
from .http import Failure, ProviderConfigError, read_body, status_failure
from .secret import Secret
from .settings import ProviderSettings
from .sse_provider import ChunkMapper, SseProvider, settings_tuning
from .wire import excerpt

DEFAULT_BASE_URL: Final = "https://api.anthropic.com"
DEFAULT_API_KEY_ENV: Final = "ANTHROPIC_API_KEY"
DEFAULT_MAX_TOKENS: Final = 32000
"""Output tokens per call when the request names none (the API requires a figure)."""
MIN_THINKING_BUDGET: Final = 1024
"""The smallest extended-thinking budget the API accepts."""


@dataclass(eq=False)
class AnthropicProvider(SseProvider):
    """The tunables (timeouts, retries, `trust_env`, `sleep`) are `SseProvider`'s, by keyword."""

    label: ClassVar[str] = "anthropic"
    path: ClassVar[str] = "/v1/messages"
    extra_headers: ClassVar[dict[str, str]] = {"anthropic-version": API_VERSION}
    finish_word: ClassVar[str] = "stop reason"
    cut_retryable: ClassVar[bool] = True
    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: Secret | None = field(default=None, repr=False)
    max_tokens: int = DEFAULT_MAX_TOKENS
    thinking_budget: int | None = None
    """Extended thinking with this budget of tokens (less than `max_tokens`); None: off."""
    prompt_caching: bool = True
    name: str = "anthropic"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_tokens < 1:
            raise ProviderConfigError(f"max_tokens must be positive, got {self.max_tokens}")
        if self.thinking_budget is not None:
            _check_budget(self.thinking_budget, self.max_tokens)

    def _body(self, request: ModelRequest, model: str) -> dict[str, Any]:
        max_tokens = request.max_tokens or self.max_tokens
        budget = self.thinking_budget
        if budget is not None and budget >= max_tokens:
            budget = None  # a request that caps its answer below the budget goes without
        return request_body(
            model,
            request.messages,
            request.tools,
            system=request.system,
            max_tokens=max_tokens,
            thinking_budget=budget,
            cache=self.prompt_caching,
        )

    def _key_headers(self, key: Secret) -> dict[str, str]:
        return {"x-api-key": key.reveal()}

    def _mapper(self) -> ChunkMapper:
        return EventMapper(self._redact)

    async def _check(self, response: httpx.Response, shown: str) -> None:
        if response.status_code != 200:
            failure = await status_failure(response, shown, self._redact, self._status_detail)
            should_retry = response.headers.get("x-should-retry")
            if should_retry in ("true", "false"):
                failure.retryable = should_retry == "true"
            raise failure
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            raise await self._not_a_stream(response)

    def _status_detail(self, text: str) -> str | None:
        """The API's own message in an error body: `{"type": "error", "error": {...}}`."""
        found = _body_error(text)
        return error_message(found, self._redact)[0] if found is not None else None

    async def _not_a_stream(self, response: httpx.Response) -> Failure:
        text = await read_body(response)
        found = _body_error(text)
        if found is not None:
            message, code = error_message(found, self._redact)
            return Failure(f"the server answered with an error: {message}", code, retryable=False)
        return Failure(
            "the server answered with "
            f"{response.headers.get('content-type') or 'no content type'}, not an event "
            f"stream: {excerpt(self._redact(text))}",
            "not-a-stream",
            retryable=False,
        )


class _ErrorBody(msgspec.Struct):
    error: ErrorPayload


def _body_error(text: str) -> ErrorPayload | None:
    try:
        return msgspec.json.decode(text, type=_ErrorBody).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _check_budget(budget: int, max_tokens: int) -> None:
    if budget < MIN_THINKING_BUDGET:
        raise ProviderConfigError(
            f"a thinking budget must be at least {MIN_THINKING_BUDGET} tokens, got {budget}"
        )
    if budget >= max_tokens:
        raise ProviderConfigError(
            f"a thinking budget ({budget}) must be less than max_tokens ({max_tokens})"
        )


def from_settings(settings: ProviderSettings) -> AnthropicProvider:
    """The provider `--provider anthropic` names (`acp_server.providers.registry`)."""
    provider = AnthropicProvider(
        settings.model,
        settings.base_url or DEFAULT_BASE_URL,
        settings.api_key,
        max_tokens=settings.max_tokens or DEFAULT_MAX_TOKENS,
        thinking_budget=settings.thinking_budget,
        **settings_tuning(settings),
    )
    AnthropicProvider.warn_keyless(
        settings, DEFAULT_API_KEY_ENV
    )  # once the settings are known good
    return provider


__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "AnthropicProvider",
    "from_settings",
]
