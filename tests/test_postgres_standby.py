"""Reading from standbys and failing over (SPEC 2.6), against a real primary and a streaming
standby (`postgres_pair`): the fixture itself first, then the store's reads and its writers."""

from __future__ import annotations

import psycopg
import pytest
from postgres_server import StandbyPair

pytestmark = pytest.mark.process


def _one(url: str, statement: str) -> object:
    """The first column of the first row `statement` returns (None when it returns none)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        row = cur.fetchone() if cur.description else None
    return None if row is None else row[0]


def test_the_standby_replays_what_the_primary_commits(postgres_pair: StandbyPair) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t AS SELECT 7 AS v")
    postgres_pair.wait_in_step()
    assert _one(postgres_pair.standby.url, "SELECT v FROM t") == 7
    assert _one(postgres_pair.standby.url, "SELECT pg_is_in_recovery()") is True


def test_a_paused_standby_lags_until_resumed(postgres_pair: StandbyPair) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t (v integer)")
    postgres_pair.wait_in_step()
    postgres_pair.pause_replay()
    _one(postgres_pair.primary.url, "INSERT INTO t VALUES (1) RETURNING v")
    assert _one(postgres_pair.standby.url, "SELECT count(*) FROM t") == 0
    postgres_pair.resume_replay()
    postgres_pair.wait_in_step()
    assert _one(postgres_pair.standby.url, "SELECT count(*) FROM t") == 1


def test_a_promoted_standby_takes_writes_at_the_multi_host_url(
    postgres_pair: StandbyPair,
) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t AS SELECT 1 AS v")
    postgres_pair.wait_in_step()
    postgres_pair.stop_primary("immediate")
    postgres_pair.promote()
    writer = f"{postgres_pair.url}?target_session_attrs=read-write"
    _one(writer, "INSERT INTO t VALUES (2) RETURNING v")
    assert _one(writer, "SELECT sum(v) FROM t") == 3
    assert _one(writer, "SELECT inet_server_port()") == postgres_pair.standby.port
