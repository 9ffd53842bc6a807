"""The engines a store URL can name (SPEC 2.6): one table, `{scheme: engine}`.

The URL parser, `serve`, `acp-server log --store`, `acp-server store` and the snapshot runner
all go through it: what an engine's URL names (a directory, a database file, a database
server), how its store is checked and opened, and where its sessions' log files are when it
keeps them as files. Each engine's module is imported only when a store of it is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from .api import Store
    from .log import Compression
    from .url import StoreUrl

EngineName = Literal["jsonl", "sqlite", "postgresql"]
Names = Literal["directory", "file", "server"]


@dataclass(frozen=True)
class Engine:
    """One engine: what its URLs name and how a store of it is opened."""

    name: EngineName
    scheme: str
    """The scheme it is written with (others may name it too: the table has them all)."""
    names: Names
    """What a URL of it names: a directory, a file (both by absolute path) or a server."""
    opener: Callable[[StoreUrl, bool, Compression], Store]

    def problem(self, url: StoreUrl) -> str | None:
        """Why the store cannot be used, in one line, or None (checked before serving)."""
        path = url.path
        if self.names == "server":
            if find_spec("psycopg") is None or find_spec("psycopg_pool") is None:
                return (
                    f"{url.shown}: PostgreSQL stores need the driver: "
                    "pip install 'acp-server[postgres]'"
                )
            return None
        assert path is not None
        if self.names == "directory":
            if path.exists() and not path.is_dir():
                return f"{url.shown}: not a directory"
            return None
        if path.exists() and not path.is_file():
            return f"{url.shown}: not a regular file"
        if not path.parent.is_dir():
            return f"{url.shown}: no directory {path.parent}"
        return None

    def missing(self, url: StoreUrl) -> bool:
        """Whether the URL names a database file that is not there (opening it creates it)."""
        return self.names == "file" and url.path is not None and not url.path.exists()

    def log_file(self, url: StoreUrl, session_id: str) -> Path | None:
        """Where the session's log is a file of its own (the log tools then read it as one):
        in a directory store; None for a database."""
        return url.path / session_id if self.names == "directory" and url.path else None

    def url_in(self, directory: Path) -> StoreUrl:
        """A store of this engine kept in `directory` (a database file is `sessions.db`)."""
        from .url import StoreUrl

        if self.names == "directory":
            return StoreUrl(self.name, directory, str(directory))
        if self.names == "file":
            path = directory / "sessions.db"
            return StoreUrl(self.name, path, f"{self.scheme}://{path}")
        raise ValueError(f"a {self.name} store is not kept in a directory")

    def open(self, url: StoreUrl, *, pack: bool = True, compression: Compression = "none") -> Store:
        return self.opener(url, pack, compression)


def _jsonl(url: StoreUrl, pack: bool, compression: Compression) -> Store:
    from .jsonl import JsonlStore

    assert url.path is not None
    return JsonlStore(url.path, pack=pack, compression=compression)


def _sqlite(url: StoreUrl, pack: bool, compression: Compression) -> Store:
    from .sqlite import SqliteStore

    assert url.path is not None
    return SqliteStore(url.path, pack=pack)


def _postgresql(url: StoreUrl, pack: bool, compression: Compression) -> Store:
    from .postgres import PostgresStore

    return PostgresStore(url.text, pack=pack)


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
