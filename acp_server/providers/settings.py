"""`ProviderSettings`: what the command line gathered for a provider, handed to its builder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .secret import Secret


class ProviderSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What the command line gathered for a provider; None: the provider's default. A provider
    reads the fields it takes (`acp_server.providers.registry.ProviderSpec.options`)."""

    model: str = ""
    """A live provider: the model name sent with every request (the command line requires one)."""
    base_url: str | None = None
    api_key: Secret | None = None
    api_key_env: str = ""
    """Where the key was looked for, for messages (the provider never reads it)."""
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    thinking_budget: int | None = None
    replay: Path | None = None
    """llm-replay: the fixture (a file or a scenario directory); None: the bundled demo."""
    replay_override: Path | None = None
    pace_ms: int = 0
