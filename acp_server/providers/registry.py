"""The providers, named in one place: what `--provider` offers and how each one is built.

Each provider registers a `ProviderSpec`: its name, its defaults (a live one's API root and the
variable holding its key), the settings it takes beyond its kind's common ones, and the module
that builds it, imported only when that provider is chosen, so that naming the providers loads
nothing heavy (the command line imports this module before it knows which provider it needs).
`llm-replay`, the default, replays fixtures and takes no key; the others are live models.

A provider is built from `ProviderSettings`, a live one's key already found (a `Secret` or
None) by the key sources of `acp_server.providers.secret`: a provider never reads the
environment.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec

from .names import KEY_VARIABLES, REPLAY, key_variables
from .settings import ProviderSettings

if TYPE_CHECKING:
    from .base import Provider


class ProviderSpec(msgspec.Struct, frozen=True):
    name: str
    summary: str
    """One line for `--help`."""
    build: Callable[[ProviderSettings], Provider]
    """Makes the provider; imports its module when called, not before."""
    options: frozenset[str] = frozenset()
    """The `ProviderSettings` fields beyond its kind's common ones that it takes."""
    default_base_url: str = ""

    @property
    def api_key_env(self) -> str:
        """The environment variable its key is read from by default; "": it takes no key."""
        return KEY_VARIABLES[self.name]

    @property
    def live(self) -> bool:
        """Whether it calls a model over the network, with a key and a model name."""
        return bool(self.api_key_env)


def _replay(settings: ProviderSettings) -> Provider:
    from .bundled import from_settings

    return from_settings(settings)


def _openai(settings: ProviderSettings) -> Provider:
    from .openai import from_settings

    return from_settings(settings)


def _anthropic(settings: ProviderSettings) -> Provider:
    from .anthropic import from_settings

    return from_settings(settings)


PROVIDERS: Final[dict[str, ProviderSpec]] = {
    p.name: p
    for p in (
        ProviderSpec(
            REPLAY,
            "recorded fixtures (SPEC 5): --replay, else the bundled demo recording",
            _replay,
            frozenset({"replay", "replay_override", "pace_ms"}),
        ),
        ProviderSpec(
            "openai",
            "any OpenAI-compatible chat completions endpoint (OpenAI, DeepSeek, vLLM, "
            "llama.cpp, Ollama)",
            _openai,
            frozenset({"max_tokens", "reasoning"}),
            "https://api.openai.com/v1",
        ),
        ProviderSpec(
            "anthropic",
            "Anthropic's Messages API (Claude), or a gateway that speaks it",
            _anthropic,
            frozenset({"max_tokens", "thinking_budget"}),
            "https://api.anthropic.com",
        ),
    )
}

PROVIDER_NAMES: Final = tuple(PROVIDERS)
LIVE_PROVIDERS: Final = {name: p for name, p in PROVIDERS.items() if p.live}


def provider_spec(name: str) -> ProviderSpec:
    """The provider called `name`; `ValueError` for a name that is not registered."""
    try:
        return PROVIDERS[name]
    except KeyError:
        raise ValueError(f"no provider called {name!r}: {', '.join(PROVIDERS)}") from None


def live_provider(name: str) -> ProviderSpec | None:
    """The live provider called `name`; None for llm-replay (or an unknown name)."""
    return LIVE_PROVIDERS.get(name)


__all__ = [
    "LIVE_PROVIDERS",
    "PROVIDERS",
    "PROVIDER_NAMES",
    "REPLAY",
    "ProviderSettings",
    "ProviderSpec",
    "key_variables",
    "live_provider",
    "provider_spec",
]
