"""The engines a store URL can name (SPEC 2.6): one table, `{scheme: engine}`.

The URL parser, `serve`, `acp-server log --store`, `acp-server store` and the snapshot runner
all go through it: what an engine's URL names (a directory, a database file, a database
server), how its store is checked and opened, and where its sessions' log files are when it
keeps them as files. Each engine's module is imported only when a store of it is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

import msgspec

if TYPE_CHECKING:
    from .api import Store
    from .jsonl.lines import Compression


EngineName = Literal["jsonl", "sqlite", "postgresql"]
Names = Literal["directory", "file", "server"]


class StoreOptions(msgspec.Struct, frozen=True):
    """How a store is opened beyond what its URL names (the engines that do not need an option
    ignore it)."""

    read_url: str | None = None
    """`--store-read`: where a PostgreSQL store's reads go first (its standbys); None: the
    store's own URL serves every read. It may hold a password: never shown as given."""
    retry_seconds: float = 30.0
    """How long a database writer that lost its connection keeps reconnecting before its
    session's writes fail (`serve --store-retry`); 0: they fail at once."""


class Engine(msgspec.Struct, frozen=True):
    """One engine: what its URLs name and how a store of it is opened (`path`: the directory
    or database file a URL names, None for a server; `shown`: the URL as it may be shown)."""

    name: EngineName
    scheme: str
    """The scheme it is written with (others may name it too: the table has them all)."""
    names: Names
    """What a URL of it names: a directory, a file (both by absolute path) or a server."""
    opener: Callable[[Path | None, str, bool, Compression, StoreOptions], Store]
    """Builds the store from the path and the URL as given, `pack`, `compression` and the
    options."""

    def problem(self, path: Path | None, shown: str) -> str | None:
        """Why the store cannot be used, in one line, or None (checked before serving)."""
        if self.names == "server":
            if find_spec("psycopg") is None or find_spec("psycopg_pool") is None:
                return (
                    f"{shown}: PostgreSQL stores need the driver: "
                    "pip install 'acp-server[postgres]'"
                )
            return None
        assert path is not None
        if self.names == "directory":
            if path.exists() and not path.is_dir():
                return f"{shown}: not a directory"
            return None
        if path.exists() and not path.is_file():
            return f"{shown}: not a regular file"
        if not path.parent.is_dir():
            return f"{shown}: no directory {path.parent}"
        return None

    def missing(self, path: Path | None) -> bool:
        """Whether the URL names a database file that is not there (opening it creates it)."""
        return self.names == "file" and path is not None and not path.exists()

    def log_file(self, path: Path | None, session_id: str) -> Path | None:
        """Where the session's log is a file of its own (the log tools then read it as one):
        in a directory store; None for a database."""
        return path / session_id if self.names == "directory" and path is not None else None


def _jsonl(
    path: Path | None, text: str, pack: bool, compression: Compression, options: StoreOptions
) -> Store:
    from .jsonl.store import JsonlStore

    assert path is not None
    return JsonlStore(path, pack=pack, compression=compression)


def _sqlite(
    path: Path | None, text: str, pack: bool, compression: Compression, options: StoreOptions
) -> Store:
    from .sql.sqlite import SqliteStore

    assert path is not None
    return SqliteStore(path, pack=pack)


def _postgresql(
    path: Path | None, text: str, pack: bool, compression: Compression, options: StoreOptions
) -> Store:
    from .sql.postgres import PostgresStore

    return PostgresStore(
        text, pack=pack, read_url=options.read_url, retry_seconds=options.retry_seconds
    )


JSONL: Final = Engine("jsonl", "file", "directory", _jsonl)
SQLITE: Final = Engine("sqlite", "sqlite", "file", _sqlite)
POSTGRESQL: Final = Engine("postgresql", "postgresql", "server", _postgresql)

ENGINES: Final[Mapping[str, Engine]] = {
    "file": JSONL,
    "sqlite": SQLITE,
    "postgresql": POSTGRESQL,
    "postgres": POSTGRESQL,
}
"""Every engine, by the URL schemes that name it."""

BY_NAME: Final[Mapping[str, Engine]] = {engine.name: engine for engine in ENGINES.values()}
