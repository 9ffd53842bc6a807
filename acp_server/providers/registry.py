"""The providers, named in one place: what `--provider` offers and how each one is built.

`llm-replay` (the default) replays fixtures and is built by the server from its replay flags.
Each live provider registers a `LiveProvider`: its name, its defaults (API root, the variable
holding its key, the flags it takes beyond the common ones) and the module that builds it,
imported only when that provider is chosen, so that naming the providers loads nothing heavy
(the command line imports this module before it knows which provider it needs).

A live provider is built from `LiveSettings`, its key already found (a `Secret` or None) by
the key sources of `acp_server.providers.secret`: a provider never reads the environment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec

from .settings import LiveSettings

if TYPE_CHECKING:
    from .base import Provider

REPLAY: Final = "llm-replay"


class LiveProvider(msgspec.Struct, frozen=True):
    name: str
    summary: str
    """One line for `--help`."""
    default_base_url: str
    api_key_env: str
    """The environment variable its key is read from by default."""
    build: Callable[[LiveSettings], Provider]
    """Makes the provider; imports its module when called, not before."""
    options: frozenset[str] = frozenset()
    """The `LiveSettings` fields beyond the common ones that it takes."""


def _openai(settings: LiveSettings) -> Provider:
    from .openai import from_settings

    return from_settings(settings)


def _anthropic(settings: LiveSettings) -> Provider:
    from .anthropic import from_settings

    return from_settings(settings)


LIVE_PROVIDERS: Final[dict[str, LiveProvider]] = {
    p.name: p
    for p in (
        LiveProvider(
            "openai",
            "any OpenAI-compatible chat completions endpoint (OpenAI, DeepSeek, vLLM, "
            "llama.cpp, Ollama)",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            _openai,
            frozenset({"max_tokens", "reasoning"}),
        ),
        LiveProvider(
            "anthropic",
            "Anthropic's Messages API (Claude), or a gateway that speaks it",
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
            _anthropic,
            frozenset({"max_tokens", "thinking_budget"}),
        ),
    )
}

PROVIDER_NAMES: Final = (REPLAY, *LIVE_PROVIDERS)


def key_variables() -> frozenset[str]:
    """The variable every live provider reads its key from by default: whichever provider
    runs, the programs the server starts inherit none of them."""
    return frozenset(p.api_key_env for p in LIVE_PROVIDERS.values())


def live_provider(name: str) -> LiveProvider | None:
    """The live provider called `name`; None for llm-replay (or an unknown name)."""
    return LIVE_PROVIDERS.get(name)


__all__ = [
    "LIVE_PROVIDERS",
    "PROVIDER_NAMES",
    "REPLAY",
    "LiveProvider",
    "LiveSettings",
    "key_variables",
    "live_provider",
]
