"""`LiveSettings`: what the command line gathered for a live provider, handed to its builder."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .secret import Secret


@dataclass(frozen=True)
class LiveSettings:
    """What the command line gathered for a live provider; None: the provider's default."""

    model: str
    base_url: str | None = None
    api_key: Secret | None = field(default=None, repr=False)
    api_key_env: str = ""
    """Where the key was looked for, for messages (the provider never reads it)."""
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    thinking_budget: int | None = None
