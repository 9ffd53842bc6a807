"""Store URLs (SPEC 2.6): which engine holds the sessions, and where.

`parse_store_url` is pure: a directory path or `file:///abs/dir` is a JSONL store,
`sqlite:///abs/path.db` one SQLite database, `postgresql://` (or `postgres://`) a PostgreSQL
database. Anything else is a `ValueError` whose message is one line for a person. A password in
a URL is never shown: `redact_url` and `StoreUrl.shown` print it as `***`.

`open_store` builds the engine a URL names, importing only that engine's module.
"""

from __future__ import annotations

import re
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote, urlsplit

import msgspec

from .redact import redact_url

if TYPE_CHECKING:
    from .api import Store
    from .log import Compression

Engine = Literal["jsonl", "sqlite", "postgresql"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SCHEMES: dict[str, Engine] = {
    "file": "jsonl",
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "postgres": "postgresql",
}


class StoreUrl(msgspec.Struct, frozen=True):
    engine: Engine
    path: Path | None
    """The directory (JSONL) or database file (SQLite); None for a database server."""
    text: str
    """The URL as given (it may hold a password: show `shown` instead)."""

    @property
    def shown(self) -> str:
        return redact_url(self.text)


def parse_store_url(text: str) -> StoreUrl:
    """The store a URL names; `ValueError` (one line, password hidden) if it names none."""
    if not text.strip():
        raise ValueError("empty store URL")
    match = _SCHEME.match(text)
    if match is None:
        return StoreUrl("jsonl", Path(text), text)
    scheme = match.group(1).lower()
    engine = _SCHEMES.get(scheme)
    if engine is None:
        raise ValueError(
            f"unknown store URL scheme {scheme!r} in {redact_url(text)} "
            "(use a directory, file:///abs/dir, sqlite:///abs/path.db or postgresql://...)"
        )
    if engine == "postgresql":
        return StoreUrl(engine, None, text)
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise ValueError(f"{redact_url(text)}: the path must be absolute ({scheme}:///abs/path)")
    if parts.query or parts.fragment:
        raise ValueError(f"{redact_url(text)}: a {scheme} URL takes no query or fragment")
    path = unquote(parts.path)
    if path.rstrip("/") == "":
        raise ValueError(f"{redact_url(text)}: no path")
    return StoreUrl(engine, Path(path), text)


def store_url_for_dir(directory: Path) -> StoreUrl:
    """The JSONL store of a sessions directory (`--sessions-dir`)."""
    return StoreUrl("jsonl", directory, str(directory))


def check_store_url(url: StoreUrl) -> str | None:
    """Why the store cannot be used, in one line, or None (checked before serving)."""
    path = url.path
    if url.engine == "postgresql":
        if find_spec("psycopg") is None or find_spec("psycopg_pool") is None:
            return (
                f"{url.shown}: PostgreSQL stores need the driver: "
                "pip install 'acp-server[postgres]'"
            )
        return None
    assert path is not None
    if url.engine == "jsonl":
        if path.exists() and not path.is_dir():
            return f"{url.shown}: not a directory"
        return None
    if path.exists() and not path.is_file():
        return f"{url.shown}: not a regular file"
    if not path.parent.is_dir():
        return f"{url.shown}: no directory {path.parent}"
    return None


def open_store(url: StoreUrl, *, pack: bool = True, compression: Compression = "none") -> Store:
    """The engine `url` names (`UnsupportedStore`, `LogError` or `OSError` if it cannot open)."""
    from .errors import UnsupportedStore

    problem = check_store_url(url)
    if problem is not None:
        raise UnsupportedStore(problem)
    if url.engine == "postgresql":
        from .postgres import PostgresStore

        return PostgresStore(url.text, pack=pack)
    assert url.path is not None
    if url.engine == "sqlite":
        from .sqlite import SqliteStore

        return SqliteStore(url.path, pack=pack)
    from .jsonl import JsonlStore

    return JsonlStore(url.path, pack=pack, compression=compression)
