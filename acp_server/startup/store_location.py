"""Which store the sessions are in when a command does not say otherwise: the one choice that
`serve`, `log`, `store` and `sessions` make alike, and the launcher's cheap look at it.

First given, first taken: `--store URL`, `--sessions-dir DIR`, `$ACP_SERVER_STORE`,
`$ACP_SERVER_SESSIONS_DIR`, else `sessions/` in the platform's user data directory
(`default_sessions_dir`). That directory needs `platformdirs`, whose import costs more than the
whole early `initialize` answer, so it is looked up only where a command needs the path, never
by the launcher.

The launcher imports this module before the early answer: the standard library's lightest
parts only (`tests/test_startup_imports.py`). `ready_early` is its look at the store: the early
answer is given only for a sessions directory that is there (made now if need be) and writable;
anything else (a directory that cannot be made, a database, a URL it would have to parse) waits
for the full check, made before any answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final, NamedTuple

STORE_ENV: Final = "ACP_SERVER_STORE"
"""The store when neither `--store` nor `--sessions-dir` is given."""
STORE_READ_ENV: Final = "ACP_SERVER_STORE_READ"
"""A PostgreSQL store's standbys when `--store-read` is not given."""
SESSIONS_DIR_ENV: Final = "ACP_SERVER_SESSIONS_DIR"
"""The sessions directory when no flag and no `$ACP_SERVER_STORE` names the store."""
PLATFORM_DEFAULT: Final = "the platform's user data directory"
"""The source of the default choice, as messages name it."""


class StoreChoice(NamedTuple):
    """The store a command line and the environment name, before it is parsed or checked."""

    text: str | None
    """The store URL or sessions directory as given; None: the platform's default directory."""
    source: str
    """Where it was given: `--store`, `--sessions-dir`, `ACP_SERVER_STORE`,
    `ACP_SERVER_SESSIONS_DIR` or `PLATFORM_DEFAULT`."""

    @property
    def is_directory(self) -> bool:
        """Whether it names a sessions directory (a JSONL store) rather than a store URL."""
        return self.source in ("--sessions-dir", SESSIONS_DIR_ENV, PLATFORM_DEFAULT)


def choose_store(
    store: str | None, sessions_dir: str | None, environ: Mapping[str, str]
) -> StoreChoice:
    """The store `--store` and `--sessions-dir` (None: not given) and the environment name;
    `ValueError` when both flags are given."""
    if store is not None and sessions_dir is not None:
        raise ValueError(
            "--store and --sessions-dir: give one of them (a directory is a store URL)"
        )
    if store is not None:
        return StoreChoice(store, "--store")
    if sessions_dir is not None:
        return StoreChoice(sessions_dir, "--sessions-dir")
    for name in (STORE_ENV, SESSIONS_DIR_ENV):
        if environ.get(name):
            return StoreChoice(environ[name], name)
    return StoreChoice(None, PLATFORM_DEFAULT)


def default_sessions_dir() -> str:
    """`sessions/` in the platform's user data directory (`platformdirs` is imported now)."""
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("acp-server", appauthor=False), "sessions")


def ready_early(choice: StoreChoice) -> bool:
    """Whether `initialize` may be answered before the full check of the store: its directory
    is there, made now if it was not (as serving makes it), and writable. The platform's
    default is not looked up here (see the module's note): `serve` checks it before serving,
    as it checks every store."""
    if choice.text is None:
        return True
    directory = choice.text if choice.is_directory else _plain_directory(choice.text)
    if directory is None:
        return False
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return False  # serving says why, in the same words as with no early answer
    return os.path.isdir(directory) and os.access(directory, os.W_OK | os.X_OK)


def _plain_directory(url: str) -> str | None:
    """The directory a store URL names when that is plain to see: a path, or a `file:///`
    URL with nothing to decode; None for anything else (a database, a scheme, an escape)."""
    if url.startswith("file:///"):
        path = url[len("file://") :]
        return None if any(c in path for c in "%?#") else path
    if ":" in url.split("/", 1)[0]:
        return None  # a scheme: the URL parser decides what it names
    return url
