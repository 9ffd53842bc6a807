"""Opening a SQLite store while other processes open it too (SPEC 2.6): SQLite answers the
losers of the race to switch a new database to WAL "database is locked" at once, without its
busy timeout, so the store tries again; any other failure is said at once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acp_server.storage.errors import DamagedStore
from acp_server.storage.sql.sqlite import SqliteStore


def test_a_database_locked_while_opening_is_opened_when_it_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[int] = []
    open_once = SqliteStore._open_once

    def locked_once(self: SqliteStore) -> sqlite3.Connection:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise sqlite3.OperationalError("database is locked")
        return open_once(self)

    monkeypatch.setattr(SqliteStore, "_open_once", locked_once)
    store = SqliteStore(tmp_path / "s.db")
    assert attempts == [0, 1]
    assert store.url == f"sqlite://{tmp_path / 's.db'}"


def test_a_file_that_is_not_a_database_is_refused_without_trying_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    path.write_bytes(b"not a database, and long enough to have a header " * 4)
    attempts: list[int] = []
    open_once = SqliteStore._open_once

    def counted(self: SqliteStore) -> sqlite3.Connection:
        attempts.append(1)
        return open_once(self)

    monkeypatch.setattr(SqliteStore, "_open_once", counted)
    with pytest.raises(DamagedStore) as refused:
        SqliteStore(path)
    assert (len(attempts), str(refused.value)) == (
        1,
        f"sqlite://{path}: cannot open the database: file is not a database",
    )
