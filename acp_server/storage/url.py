"""Store URLs (SPEC 2.6): which engine holds the sessions, and where.

`parse_store_url` is pure: a directory path or `file:///abs/dir` is a JSONL store,
`sqlite:///abs/path.db` one SQLite database, `postgresql://` (or `postgres://`) a PostgreSQL
database. Anything else is a `ValueError` whose message is one line for a person. A password in
a URL is never shown: `redact_url` and `StoreUrl.shown` print it as `***`.

Which schemes name which engine, and what each engine's URL names, is the engine table's
(`engines.py`); `open_store` builds the store a URL names, importing only its engine's module.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import msgspec

from .engines import BY_NAME, ENGINES, JSONL, Engine, EngineName, StoreOptions
from .redact import redact_url

if TYPE_CHECKING:
    from .api import Store
    from .jsonl.lines import Compression

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_BARE_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(?!//)")


class StoreUrl(msgspec.Struct, frozen=True):
    engine: EngineName
    path: Path | None
    """The directory (JSONL) or database file (SQLite); None for a database server."""
    text: str
    """The URL as given (it may hold a password: show `shown` instead)."""

    @property
    def shown(self) -> str:
        return redact_url(self.text)

    @property
    def kind(self) -> Engine:
        """The engine's entry in the engine table."""
        return BY_NAME[self.engine]

    def log_file(self, session_id: str) -> Path | None:
        """The session's log file, where the engine keeps each session in one (`Engine`)."""
        return self.kind.log_file(self.path, session_id)


def parse_store_url(text: str) -> StoreUrl:
    """The store a URL names; `ValueError` (one line, password hidden) if it names none."""
    if not text.strip():
        raise ValueError("empty store URL")
    match = _SCHEME.match(text)
    if match is None:
        bare = _BARE_SCHEME.match(text)
        if bare is not None and bare.group(1).lower() in ENGINES:
            # `sqlite:a.db` is not a directory named so: it is a relative path, refused as
            # `sqlite://a.db` is.
            scheme = bare.group(1).lower()
            if ENGINES[scheme].names == "server":
                raise ValueError(f"{redact_url(text)}: write {scheme}://user@host:port/db")
            raise ValueError(
                f"{redact_url(text)}: the path must be absolute ({scheme}:///abs/path)"
            )
        return StoreUrl(JSONL.name, Path(text), text)
    scheme = match.group(1).lower()
    engine = ENGINES.get(scheme)
    if engine is None:
        raise ValueError(
            f"unknown store URL scheme {scheme!r} in {redact_url(text)} "
            "(use a directory, file:///abs/dir, sqlite:///abs/path.db or postgresql://...)"
        )
    if engine.names == "server":
        return StoreUrl(engine.name, None, text)
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
        raise ValueError(f"{redact_url(text)}: the path must be absolute ({scheme}:///abs/path)")
    if parts.query or parts.fragment:
        raise ValueError(f"{redact_url(text)}: a {scheme} URL takes no query or fragment")
    path = unquote(parts.path)
    if path.rstrip("/") == "":
        raise ValueError(f"{redact_url(text)}: no path")
    return StoreUrl(engine.name, Path(path), text)


def store_url_for_dir(directory: Path) -> StoreUrl:
    """The JSONL store of a sessions directory (`--sessions-dir`)."""
    return StoreUrl(JSONL.name, directory, str(directory))


def store_url_in(engine: EngineName, directory: Path) -> StoreUrl:
    """A store of `engine` kept in `directory` (a database file is `sessions.db` in it)."""
    kind = BY_NAME[engine]
    if kind.names == "directory":
        return StoreUrl(engine, directory, str(directory))
    if kind.names == "file":
        path = directory / "sessions.db"
        return StoreUrl(engine, path, f"{kind.scheme}://{path}")
    raise ValueError(f"a {engine} store is not kept in a directory")


def check_store_url(url: StoreUrl) -> str | None:
    """Why the store cannot be used, in one line, or None (checked before serving)."""
    return url.kind.problem(url.path, url.shown)


DEFAULT_OPTIONS = StoreOptions()


def open_store(
    url: StoreUrl,
    *,
    pack: bool = True,
    compression: Compression = "none",
    options: StoreOptions = DEFAULT_OPTIONS,
) -> Store:
    """The engine `url` names (`UnsupportedStore`, `LogError` or `OSError` if it cannot open)."""
    from .errors import UnsupportedStore

    problem = check_store_url(url)
    if problem is not None:
        raise UnsupportedStore(problem)
    return url.kind.opener(url.path, url.text, pack, compression, options)
