"""The store a command works on when its command line names none: the one `serve` uses.

The choice itself (flags, then the environment, then the platform's user data directory) is
`acp_server.startup.store_location`'s, shared with the launcher; here it becomes a parsed,
checked `StoreUrl`, and the words that say which store it is and why (`serve --help`, the
`--log-level info` start line, every command's error messages).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..paths import unreachable
from ..startup.store_location import (
    PLATFORM_DEFAULT,
    SESSIONS_DIR_ENV,
    STORE_ENV,
    StoreChoice,
    choose_store,
    default_sessions_dir,
)
from ..storage.url import StoreUrl, check_store_url, parse_store_url, store_url_for_dir

CHOICE_HELP = (
    f"--store or --sessions-dir, else ${STORE_ENV}, else ${SESSIONS_DIR_ENV}, else sessions/ "
    f"in {PLATFORM_DEFAULT}"
)
"""How the store is chosen, for help texts."""


class StoreChoiceError(Exception):
    """The store named cannot be used: the message is the one line a command reports."""


def chosen_store(
    store: str | None, sessions_dir: Path | str | None
) -> tuple[StoreChoice, StoreUrl]:
    """The store `--store` and `--sessions-dir` (None: not given) and the environment name,
    parsed and checked (`StoreChoiceError` naming where it was given, when it is unusable)."""
    try:
        choice = choose_store(
            store, None if sessions_dir is None else str(sessions_dir), os.environ
        )
    except ValueError as exc:
        raise StoreChoiceError(str(exc)) from None
    if choice.is_directory:
        directory = Path(choice.text if choice.text is not None else default_sessions_dir())
        if os.path.lexists(directory) and not directory.is_dir():
            reason = "not a directory" if directory.exists() else unreachable(directory)
            raise StoreChoiceError(f"{_named(choice)}: {reason}: {directory}")
        return choice, store_url_for_dir(directory)
    assert choice.text is not None
    try:
        url = parse_store_url(choice.text)
    except ValueError as exc:
        raise StoreChoiceError(f"{choice.source}: {exc}") from None
    problem = check_store_url(url)
    if problem is not None:
        raise StoreChoiceError(f"{choice.source}: {problem}")
    return choice, url


def describe(choice: StoreChoice, url: StoreUrl) -> str:
    """Which store, and why that one: `/home/me/.local/share/acp-server/sessions (the
    platform's user data directory)`."""
    return f"{url.shown} ({source_phrase(choice)})"


def source_phrase(choice: StoreChoice) -> str:
    """Where the store was named, as a phrase: "from --store", "from $ACP_SERVER_STORE",
    "the default: sessions/ in the platform's user data directory"."""
    if choice.source == PLATFORM_DEFAULT:
        return f"the default: sessions/ in {PLATFORM_DEFAULT}"
    if choice.source in (STORE_ENV, SESSIONS_DIR_ENV):
        return f"from ${choice.source}"
    return f"from {choice.source}"


def _named(choice: StoreChoice) -> str:
    """Where the store was named, as an error message starts."""
    if choice.source == PLATFORM_DEFAULT:
        return "the default sessions directory"
    return choice.source
