"""`LiveSettings`: what the command line gathered for a live provider, handed to its builder."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .secret import Secret


class LiveSettings(msgspec.Struct, frozen=True):
    """What the command line gathered for a live provider; None: the provider's default."""

    model: str
    base_url: str | None = None
    api_key: Secret | None = None
    api_key_env: str = ""
    """Where the key was looked for, for messages (the provider never reads it)."""
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    thinking_budget: int | None = None
