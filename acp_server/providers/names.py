"""The providers' names and key variables, in a leaf module that imports nothing.

The launcher decides whether to start the early `initialize` answer from these facts alone
(a provider's key variable set, or a live `--provider`, may start the process again), before
msgspec or anything else of the providers is imported; `registry` builds its specs on this table,
so there is one list of providers.
"""

from __future__ import annotations

from typing import Final

REPLAY: Final = "llm-replay"
"""The default provider."""

KEY_VARIABLES: Final[dict[str, str]] = {
    REPLAY: "",
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""Each provider's name and the variable its key is read from by default; "": it takes no key."""


def takes_a_key(name: str) -> bool:
    """Whether the provider called `name` is live (reads a key); False for an unknown name."""
    return bool(KEY_VARIABLES.get(name))


def key_variables() -> frozenset[str]:
    """The variable every live provider reads its key from by default: whichever provider
    runs, the programs the server starts inherit none of them."""
    return frozenset(variable for variable in KEY_VARIABLES.values() if variable)
